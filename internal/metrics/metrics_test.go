package metrics

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// exercise touches every metric so each family has at least one series.
func exercise(m *Metrics) {
	rm := m.Route("client")
	for _, r := range results {
		rm.Request(r, time.Millisecond)
	}
	rm.Upstream(200, 3*time.Millisecond)
	rm.Upstream(0, time.Second)
	rm.Coalesced()
	rm.BatchSize(7)
	m.Lookup(TierL1, LookupHit)
	m.Invalidation(SourcePurge, 2)
	m.SetL2Up(true)
	m.L1Source(func() int64 { return 1024 }, func() int64 { return 3 })
	m.ConfigReload(true)
}

func TestLint(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg)
	m.Tiers(true, true)
	exercise(m)

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	want := []string{
		"sidecache_requests_total", "sidecache_request_duration_seconds",
		"sidecache_cache_lookups_total", "sidecache_upstream_requests_total",
		"sidecache_upstream_duration_seconds", "sidecache_coalesced_requests_total",
		"sidecache_batch_size", "sidecache_invalidations_total",
		"sidecache_batch_isolations_total", "sidecache_batch_overflow_total",
		"sidecache_lease_takeovers_total", "sidecache_invalidations_late_total",
		"sidecache_l1_bytes", "sidecache_l1_items", "sidecache_l2_up",
		"sidecache_config_reloads_total", "sidecache_build_info",
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		got[mf.GetName()] = true
	}
	for _, name := range want {
		if !got[name] {
			t.Errorf("family %s not gathered", name)
		}
	}

	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatalf("lint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}

	// The text exposition must lint clean too (what a scraper sees).
	var text bytes.Buffer
	enc := expfmt.NewEncoder(&text, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatalf("encode: %v", err)
		}
	}
	problems, err = promlint.New(&text).Lint()
	if err != nil {
		t.Fatalf("lint text: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint (text): %s: %s", p.Metric, p.Text)
	}
}

func TestCounters(t *testing.T) {
	m := New(prometheus.NewRegistry())
	rm := m.Route("user")

	rm.Request(Hit, 40*time.Microsecond)
	rm.Request(Hit, 60*time.Microsecond)
	rm.Request(Miss, 20*time.Millisecond)
	rm.Request(Result("weird"), time.Millisecond) // unknown values still count
	rm.Upstream(204, time.Millisecond)
	rm.Upstream(404, time.Millisecond)
	rm.Upstream(503, time.Millisecond)
	rm.Upstream(-1, time.Millisecond)
	rm.Upstream(101, time.Millisecond)
	rm.Coalesced()
	rm.Coalesced()
	rm.Coalesced()
	rm.BatchIsolated(8)
	rm.BatchIsolated(4)
	rm.BatchOverflow()
	rm.LeaseTakeover()
	rm.LeaseTakeover()
	rm.LeaseTakeover()
	m.Lookup(TierL1, LookupMiss)
	m.Lookup(TierL2, LookupError)
	m.Lookup(TierL2, LookupError)
	m.Invalidation(SourceWrite, 3)
	m.Invalidation(SourcePeer, 1)
	m.Invalidation(SourcePeer, 0) // no-op
	m.ConfigReload(true)
	m.ConfigReload(false)
	m.ConfigReload(false)

	tests := []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"hit", m.requests.WithLabelValues("user", "hit"), 2},
		{"miss", m.requests.WithLabelValues("user", "miss"), 1},
		{"stale", m.requests.WithLabelValues("user", "stale"), 0},
		{"weird", m.requests.WithLabelValues("user", "weird"), 1},
		{"up 2xx", m.upstream.WithLabelValues("user", "2xx"), 1},
		{"up 3xx", m.upstream.WithLabelValues("user", "3xx"), 0},
		{"up 4xx", m.upstream.WithLabelValues("user", "4xx"), 1},
		{"up 5xx", m.upstream.WithLabelValues("user", "5xx"), 1},
		{"up error", m.upstream.WithLabelValues("user", "error"), 1},
		{"up 1xx", m.upstream.WithLabelValues("user", "1xx"), 1},
		{"coalesced", m.coalesced.WithLabelValues("user"), 3},
		{"isolations", m.isolations.WithLabelValues("user"), 2},
		{"overflow", m.overflows.WithLabelValues("user"), 1},
		{"takeovers", m.takeovers.WithLabelValues("user"), 3},
		{"l1 miss", m.lookups.WithLabelValues("l1", "miss"), 1},
		{"l1 hit", m.lookups.WithLabelValues("l1", "hit"), 0},
		{"l2 error", m.lookups.WithLabelValues("l2", "error"), 2},
		{"inv write", m.invalidations.WithLabelValues("write"), 3},
		{"inv peer", m.invalidations.WithLabelValues("peer"), 1},
		{"inv purge", m.invalidations.WithLabelValues("purge"), 0},
		{"reload ok", m.reloads.WithLabelValues("success"), 1},
		{"reload err", m.reloads.WithLabelValues("error"), 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := toFloat64(t, tt.c); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}

	// Histograms: count and sum land on the right series.
	h := histogram(t, m.requestDur.WithLabelValues("user", "hit"))
	if h.GetSampleCount() != 2 || h.GetSampleSum() < 99e-6 || h.GetSampleSum() > 101e-6 {
		t.Errorf("hit duration: count %d sum %v, want 2 and 100µs", h.GetSampleCount(), h.GetSampleSum())
	}
	// A 40µs hit must land below the 100µs bucket: sub-millisecond resolution.
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == 0.0001 && b.GetCumulativeCount() != 2 {
			t.Errorf("le=0.0001 holds %d hits, want 2", b.GetCumulativeCount())
		}
		if b.GetUpperBound() == 0.00005 && b.GetCumulativeCount() != 1 {
			t.Errorf("le=0.00005 holds %d hits, want 1", b.GetCumulativeCount())
		}
	}
	if h := histogram(t, m.upstreamDur.WithLabelValues("user")); h.GetSampleCount() != 5 {
		t.Errorf("upstream duration count %d, want 5", h.GetSampleCount())
	}
}

func TestBatchSize(t *testing.T) {
	m := New(prometheus.NewRegistry())
	rm := m.Route("user")
	for _, n := range []int{1, 3, 100, 150} {
		rm.BatchSize(n)
	}
	h := histogram(t, m.batchSize.WithLabelValues("user"))
	if h.GetSampleCount() != 4 || h.GetSampleSum() != 254 {
		t.Fatalf("count %d sum %v, want 4 and 254", h.GetSampleCount(), h.GetSampleSum())
	}
	cum := map[float64]uint64{}
	for _, b := range h.GetBucket() {
		cum[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	for le, want := range map[float64]uint64{1: 1, 5: 2, 100: 3, 200: 4} {
		if cum[le] != want {
			t.Errorf("le=%v: %d, want %d", le, cum[le], want)
		}
	}
}

func TestPreinitialised(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Tiers(true, true)
	m.Route("client")

	tests := []struct {
		family string
		want   int
	}{
		{"sidecache_cache_lookups_total", len(tiers) * len(lookupResults)},
		{"sidecache_invalidations_total", len(sources)},
		{"sidecache_config_reloads_total", 3}, // success, error, restart_required
		{"sidecache_build_info", 1},
		// Two routes: _pass (always, pass only) and client (every series).
		{"sidecache_requests_total", 1 + len(results)},
		{"sidecache_request_duration_seconds", 1 + len(results)},
		{"sidecache_upstream_requests_total", 2 * len(classes)},
		{"sidecache_upstream_duration_seconds", 2},
		{"sidecache_coalesced_requests_total", 1},
		{"sidecache_batch_size", 1},
		{"sidecache_batch_isolations_total", 1},
		{"sidecache_batch_overflow_total", 1},
		{"sidecache_lease_takeovers_total", 1},
		// Absent until their source is known.
		{"sidecache_l1_bytes", 0},
		{"sidecache_l2_up", 0},
	}
	for _, tt := range tests {
		t.Run(tt.family, func(t *testing.T) {
			n, err := gatherAndCount(reg, tt.family)
			if err != nil {
				t.Fatal(err)
			}
			if n != tt.want {
				t.Errorf("%d series, want %d", n, tt.want)
			}
		})
	}
}

// TestShapedRouteCreatesOnlyItsSeries: a route's shape decides which of its
// series exist at zero; one outside the shape appears when it occurs, and
// without L2 neither l2 lookups nor peer invalidations exist.
func TestShapedRouteCreatesOnlyItsSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Tiers(true, false)
	w := m.RouteShaped("write", Shape{Results: []Result{Pass}})
	for family, want := range map[string]int{
		"sidecache_requests_total":           2, // _pass and write, result pass
		"sidecache_coalesced_requests_total": 0,
		"sidecache_batch_size":               0,
		"sidecache_lease_takeovers_total":    0,
		"sidecache_cache_lookups_total":      len(lookupResults), // l1 only
		"sidecache_invalidations_total":      len(sources) - 1,   // no peer
	} {
		if n, err := gatherAndCount(reg, family); err != nil || n != want {
			t.Errorf("%s: %d series (%v), want %d", family, n, err, want)
		}
	}
	w.Request(Hit, 0)
	w.BatchSize(3)
	m.Invalidation(SourcePeer, 1)
	m.Lookup(TierL2, LookupHit)
	for family, want := range map[string]int{
		"sidecache_requests_total":      3,
		"sidecache_batch_size":          1,
		"sidecache_invalidations_total": len(sources),
		"sidecache_cache_lookups_total": len(lookupResults) + 1,
	} {
		if n, err := gatherAndCount(reg, family); err != nil || n != want {
			t.Errorf("after use: %s: %d series (%v), want %d", family, n, err, want)
		}
	}
}

func TestState(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)

	m.SetL2Up(true)
	if got := gauge(t, reg, "sidecache_l2_up"); got != 1 {
		t.Errorf("l2_up %v, want 1", got)
	}
	m.SetL2Up(false)
	if got := gauge(t, reg, "sidecache_l2_up"); got != 0 {
		t.Errorf("l2_up %v, want 0", got)
	}

	var bytes int64 = 10
	m.L1Source(func() int64 { return bytes }, func() int64 { return 2 })
	bytes = 4096 // read at scrape time, not at registration
	if got := gauge(t, reg, "sidecache_l1_bytes"); got != 4096 {
		t.Errorf("l1_bytes %v, want 4096", got)
	}
	if got := gauge(t, reg, "sidecache_l1_items"); got != 2 {
		t.Errorf("l1_items %v, want 2", got)
	}
	m.L1Source(func() int64 { return 7 }, func() int64 { return 1 }) // replace, no panic
	if got := gauge(t, reg, "sidecache_l1_bytes"); got != 7 {
		t.Errorf("l1_bytes after replace %v, want 7", got)
	}

	var refusals uint64
	writesRefused := false
	m.L2Source(func() time.Duration { return -1500 * time.Millisecond }, func() uint64 { return refusals }, func() bool { return writesRefused })
	refusals = 3 // read at scrape time
	if got := gauge(t, reg, "sidecache_l2_clock_offset_seconds"); got != -1.5 {
		t.Errorf("l2_clock_offset_seconds %v, want -1.5", got)
	}
	if got := gauge(t, reg, "sidecache_l2_writes_refused"); got != 0 {
		t.Errorf("l2_writes_refused %v while Redis takes writes, want 0", got)
	}
	writesRefused = true
	if got := gauge(t, reg, "sidecache_l2_writes_refused"); got != 1 {
		t.Errorf("l2_writes_refused %v while Redis refuses writes, want 1", got)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "sidecache_l2_epoch_refusals_total" {
			if got := mf.GetMetric()[0].GetCounter().GetValue(); got != 3 {
				t.Errorf("l2_epoch_refusals_total %v, want 3", got)
			}
			return
		}
	}
	t.Error("sidecache_l2_epoch_refusals_total not gathered")
}

func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.SetBuildInfo("v1.2.3")
	if n, _ := gatherAndCount(reg, "sidecache_build_info"); n != 1 {
		t.Fatalf("%d build_info series, want 1", n)
	}
	if got := toFloat64(t, m.buildInfo.WithLabelValues("v1.2.3", runtime.Version())); got != 1 {
		t.Errorf("build_info{version=v1.2.3} = %v, want 1", got)
	}
}

func TestTwoRegistries(t *testing.T) {
	r1, r2 := prometheus.NewRegistry(), prometheus.NewRegistry()
	m1, m2 := New(r1), New(r2)
	m1.Route("a").Request(Hit, 0)
	if got := toFloat64(t, m2.requests.WithLabelValues("a", "hit")); got != 0 {
		t.Errorf("second instance saw the first's hit: %v", got)
	}
	// Same registry twice is a programming error and must say so.
	defer func() {
		if recover() == nil {
			t.Error("New on an already used registry did not panic")
		}
	}()
	New(r1)
}

func TestNilSafe(t *testing.T) {
	var m *Metrics
	rm := m.Route("x")
	rm.Request(Hit, 0)
	rm.Upstream(200, 0)
	rm.Coalesced()
	rm.BatchSize(1)
	rm.BatchIsolated(2)
	rm.BatchOverflow()
	rm.LeaseTakeover()
	m.Lookup(TierL1, LookupHit)
	m.Invalidation(SourceWrite, 1)
	m.SetL2Up(true)
	m.L1Source(nil, nil)
	m.ConfigReload(true)
	m.SetBuildInfo("x")
	if rm.Name() != "" {
		t.Error("nil RouteMetrics has a name")
	}

	// A nil Registerer still gives working collectors.
	m = New(nil)
	m.Route("x").Request(Hit, 0)
	if got := toFloat64(t, m.requests.WithLabelValues("x", "hit")); got != 1 {
		t.Errorf("unregistered counter %v, want 1", got)
	}
}

func TestRouteCached(t *testing.T) {
	m := New(nil)
	first, second := m.Route("a"), m.Route("a")
	if first != second {
		t.Error("Route built two RouteMetrics for one name")
	}
	if m.Route("a").Name() != "a" {
		t.Error("wrong name")
	}
}

func TestResultIndexMatchesOrder(t *testing.T) {
	for i, r := range results {
		if resultIndex(r) != i {
			t.Errorf("resultIndex(%s) = %d, want %d", r, resultIndex(r), i)
		}
	}
}

func TestStatusClass(t *testing.T) {
	tests := []struct {
		code int
		want string
	}{
		{-1, "error"}, {0, "error"}, {99, "error"}, {101, "1xx"}, {200, "2xx"},
		{299, "2xx"}, {304, "3xx"}, {404, "4xx"}, {500, "5xx"}, {599, "5xx"}, {600, "error"},
	}
	for _, tt := range tests {
		if got := StatusClass(tt.code); got != tt.want {
			t.Errorf("StatusClass(%d) = %q, want %q", tt.code, got, tt.want)
		}
	}
}

func TestHotPathAllocs(t *testing.T) {
	m := New(prometheus.NewRegistry())
	rm := m.Route("client")
	n := testing.AllocsPerRun(100, func() {
		rm.Request(Hit, 50*time.Microsecond)
		m.Lookup(TierL1, LookupHit)
		rm.Upstream(200, time.Millisecond)
	})
	if n != 0 {
		t.Errorf("hot path allocates %v times per request", n)
	}
}

func BenchmarkRequest(b *testing.B) {
	m := New(prometheus.NewRegistry())
	rm := m.Route("client")
	b.ReportAllocs()
	for b.Loop() {
		rm.Request(Hit, 50*time.Microsecond)
	}
}

func BenchmarkRequestParallel(b *testing.B) {
	m := New(prometheus.NewRegistry())
	rm := m.Route("client")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rm.Request(Hit, 50*time.Microsecond)
			m.Lookup(TierL1, LookupHit)
		}
	})
}

func histogram(t *testing.T, o prometheus.Observer) *dto.Histogram {
	t.Helper()
	var pb dto.Metric
	if err := o.(prometheus.Metric).Write(&pb); err != nil {
		t.Fatal(err)
	}
	return pb.GetHistogram()
}

func gauge(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s not gathered", name)
	return 0
}

// toFloat64 and gatherAndCount stand in for prometheus/testutil, whose
// godebug/diff dependency is not in go.sum.
func toFloat64(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 16)
	go func() { c.Collect(ch); close(ch) }()
	var ms []prometheus.Metric
	for m := range ch {
		ms = append(ms, m)
	}
	if len(ms) != 1 {
		t.Fatalf("collected %d metrics, want 1", len(ms))
	}
	var pb dto.Metric
	if err := ms[0].Write(&pb); err != nil {
		t.Fatal(err)
	}
	switch {
	case pb.Counter != nil:
		return pb.Counter.GetValue()
	case pb.Gauge != nil:
		return pb.Gauge.GetValue()
	case pb.Untyped != nil:
		return pb.Untyped.GetValue()
	}
	t.Fatalf("metric is neither counter nor gauge: %v", &pb)
	return 0
}

func gatherAndCount(g prometheus.Gatherer, name string) (int, error) {
	mfs, err := g.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric()), nil
		}
	}
	return 0, nil
}

// TestL2SeriesOnlyWithL2: the replay and write-hold series exist only on a
// replica with L2, which alone publishes invalidations.
func TestL2SeriesOnlyWithL2(t *testing.T) {
	for _, l2 := range []bool{false, true} {
		reg := prometheus.NewPedanticRegistry()
		m := New(reg)
		m.Tiers(true, l2)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, mf := range mfs {
			got[mf.GetName()] = true
		}
		for _, name := range []string{"sidecache_invalidations_late_total", "sidecache_invalidation_replay_pending", "sidecache_invalidation_replays_abandoned_total"} {
			if got[name] != l2 {
				t.Errorf("l2=%v: family %s gathered %v", l2, name, got[name])
			}
		}
	}
}
