// Package metrics owns every Prometheus collector sidecache exports.
//
// Collectors are built on a Registerer handed in by the caller, never the
// global default registry, so two instances (two tests, or a reload that
// builds a fresh registry) never collide. Label values that are known up
// front are created at construction, so dashboards and alerts see zero
// series instead of absent ones.
//
// The request path holds a *RouteMetrics resolved once per route, so
// recording a hit is a couple of atomic adds with no label lookup and no
// allocation. A nil *Metrics or *RouteMetrics records nothing, which keeps
// other packages' tests free of metrics plumbing.
package metrics

import (
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const namespace = "sidecache"

// PassRoute is the route label of requests no route matched
// (docs/metrics.md).
const PassRoute = "_pass"

// Cache tiers, the tier label of sidecache_cache_lookups_total.
const (
	TierL1 = "l1"
	TierL2 = "l2"
)

// Lookup outcomes, the result label of sidecache_cache_lookups_total.
const (
	LookupHit   = "hit"
	LookupMiss  = "miss"
	LookupError = "error"
)

// Invalidation sources, the source label of sidecache_invalidations_total.
const (
	SourceWrite = "write" // a write route's 2xx dropped its tags
	SourcePurge = "purge" // an admin POST /purge
	SourcePeer  = "peer"  // another replica's invalidation over pub/sub
)

// Buckets for request and upstream latency. A cache hit is tens of
// microseconds, an upstream call up to the upstream timeout, so the range
// spans 50µs .. 10s.
var latencyBuckets = []float64{
	0.00005, 0.0001, 0.00025, 0.0005,
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// batchBuckets cover 1 .. a generous max_size.
var batchBuckets = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500}

var (
	tiers         = [...]string{TierL1, TierL2}
	lookupResults = [...]string{LookupHit, LookupMiss, LookupError}
	sources       = [...]string{SourceWrite, SourcePurge, SourcePeer}
)

// Metrics is the set of collectors of one sidecache process.
type Metrics struct {
	requests      *prometheus.CounterVec
	requestDur    *prometheus.HistogramVec
	lookups       *prometheus.CounterVec
	upstream      *prometheus.CounterVec
	upstreamDur   *prometheus.HistogramVec
	coalesced     *prometheus.CounterVec
	batchSize     *prometheus.HistogramVec
	isolations    *prometheus.CounterVec
	overflows     *prometheus.CounterVec
	takeovers     *prometheus.CounterVec
	refused       *prometheus.CounterVec
	edge          *prometheus.CounterVec
	batch         batchVecs
	invalidations *prometheus.CounterVec
	late          prometheus.Counter
	reloads       *prometheus.CounterVec
	buildInfo     *prometheus.GaugeVec
	state         *stateCollector
	bounds        bounds // invalidation.go
	conns         conns  // conns.go

	// Pre-resolved children for the label values known up front.
	lookup        [len(tiers)][len(lookupResults)]prometheus.Counter
	refusedBy     [len(tiers)]prometheus.Counter
	invalid       [len(sources)]prometheus.Counter
	reloadOK      prometheus.Counter
	reloadFail    prometheus.Counter
	reloadRestart prometheus.Counter

	routes sync.Map // route name -> *RouteMetrics
	mu     sync.Mutex
	reg    prometheus.Registerer // for the series only a tier brings (Tiers)
	l2Reg  bool                  // the L2-only series are registered
}

// New builds every collector and registers it on reg. It panics if reg
// already holds them (a programming error, as with MustRegister). A nil
// reg builds working but unexposed collectors.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "requests_total",
			Help:      "Client requests answered, by route and cache result.",
		}, []string{"route", "result"}),
		requestDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace,
			Name:      "request_duration_seconds",
			Help:      "Time from request to response headers plus body, by route and cache result.",
			Buckets:   latencyBuckets,
		}, []string{"route", "result"}),
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "cache_lookups_total",
			Help:      "Cache lookups by tier (l1, l2) and result (hit, miss, error).",
		}, []string{"tier", "result"}),
		upstream: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "upstream_requests_total",
			Help:      "Calls to the upstream, by route and status class (or error when no response came back).",
		}, []string{"route", "code"}),
		upstreamDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace,
			Name:      "upstream_duration_seconds",
			Help:      "Time to the upstream's response headers, by route.",
			Buckets:   latencyBuckets,
		}, []string{"route"}),
		coalesced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "coalesced_requests_total",
			Help:      "Requests that waited on another request's upstream call instead of making their own.",
		}, []string{"route"}),
		batchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace,
			Name:      "batch_size",
			Help:      "IDs per bulk upstream call of a batch route.",
			Buckets:   batchBuckets,
		}, []string{"route"}),
		isolations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "batch_isolations_total",
			Help:      "Failed bulk calls split in halves to find the IDs at fault (a 4xx or an answer the splitter rejects), by route.",
		}, []string{"route"}),
		overflows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "batch_overflow_total",
			Help:      "Per-ID lookups fetched in a batch of their own because too many batch groups were open, by route.",
		}, []string{"route"}),
		takeovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "lease_takeovers_total",
			Help:      "Waits on another replica's fill lease that ended without its fill (the holder died or lost Redis), each followed by a takeover of the lease or a fetch of its own, by route.",
		}, []string{"route"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "coherence_refused_total",
			Help:      "Stored entries a tier held but the coherence bound refused (older than coherence.max_lag while this replica cannot prove it hears its peers' invalidations), by tier; each is also a lookup miss.",
		}, []string{"tier"}),
		edge:  newEdgeRefused(),
		batch: newBatchVecs(),
		invalidations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "invalidations_total",
			Help:      "Invalidations applied, by source (write, purge, peer).",
		}, []string{"source"}),
		late: newLateCounter(),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "config_reloads_total",
			Help:      "Config reload attempts, by result (success, error, restart_required).",
		}, []string{"result"}),
		buildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace,
			Name:      "build_info",
			Help:      "Always 1; the labels name the running build.",
		}, []string{"version", "goversion"}),
		state:  newStateCollector(),
		bounds: newBounds(),
		conns:  newConns(),
	}

	// Lookups per tier and peer invalidations wait for Tiers: a process
	// without L2 never records them.
	for i, s := range sources {
		if s != SourcePeer {
			m.invalid[i] = m.invalidations.WithLabelValues(s)
		}
	}
	m.reloadOK = m.reloads.WithLabelValues("success")
	m.reloadFail = m.reloads.WithLabelValues("error")
	m.reloadRestart = m.reloads.WithLabelValues("restart_required")
	m.SetBuildInfo(defaultVersion())

	if reg != nil {
		reg.MustRegister(
			m.requests, m.requestDur, m.lookups, m.upstream, m.upstreamDur,
			m.coalesced, m.batchSize, m.isolations, m.overflows, m.takeovers,
			m.batch.quarantined, m.batch.evictions, m.batch.budget, m.batch.notStored, m.batch.dropped, m.batch.tooLarge,
			m.refused, m.edge, m.invalidations, m.reloads, m.buildInfo,
			m.state,
		)
		reg.MustRegister(m.bounds.collectors()...)
		reg.MustRegister(m.conns.collectors()...)
	}
	m.reg = reg
	m.RouteShaped(PassRoute, Shape{Results: []Result{Pass}})
	return m
}

// Tiers creates the lookup series of the configured tiers, and the peer
// invalidation and coherence series when there is an L2 (peers reach this
// replica only through it). Call it once, before the first request.
func (m *Metrics) Tiers(l1, l2 bool) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, t := range tiers {
		if t == TierL1 && !l1 || t == TierL2 && !l2 {
			continue
		}
		for j, r := range lookupResults {
			m.lookup[i][j] = m.lookups.WithLabelValues(t, r)
		}
	}
	if l2 {
		m.invalid[indexOf(sources[:], SourcePeer)] = m.invalidations.WithLabelValues(SourcePeer)
		if m.reg != nil && !m.l2Reg {
			// Only a replica with L2 publishes and replays invalidations.
			m.reg.MustRegister(append(m.bounds.l2Collectors(), m.late)...)
			m.l2Reg = true
		}
		// The coherence bound exists only with L2 (peers to hear).
		for i, t := range tiers {
			if t == TierL1 && !l1 {
				continue
			}
			m.refusedBy[i] = m.refused.WithLabelValues(t)
		}
	}
}

// CoherenceRefused counts one stored entry of tier refused by the
// coherence bound (coherence.max_lag).
func (m *Metrics) CoherenceRefused(tier string) {
	if m == nil {
		return
	}
	if i := indexOf(tiers[:], tier); i >= 0 && m.refusedBy[i] != nil {
		m.refusedBy[i].Inc()
		return
	}
	m.refused.WithLabelValues(tier).Inc()
}

// defaultVersion is the main module's version as the Go toolchain stamped
// it; cmd overrides it with SetBuildInfo when it knows better (ldflags).
func defaultVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "unknown"
}

// SetBuildInfo replaces the build_info series with one for version.
func (m *Metrics) SetBuildInfo(version string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.buildInfo.Reset()
	m.buildInfo.WithLabelValues(version, runtime.Version()).Set(1)
}

// Route returns the pre-resolved collectors of one route, creating (and
// zero-initialising) every series a route can have on first use. Resolve
// it once and keep the pointer: this call does a map lookup.
func (m *Metrics) Route(name string) *RouteMetrics {
	if m == nil {
		return nil
	}
	if rm, ok := m.routes.Load(name); ok {
		return rm.(*RouteMetrics)
	}
	rm, _ := m.routes.LoadOrStore(name, newRouteMetrics(m, name, fullShape))
	return rm.(*RouteMetrics)
}

// RouteShaped is Route creating at zero only the series of s: the ones the
// route can move. Call it when routes are compiled (a reload may change a
// route's shape; series already created stay).
func (m *Metrics) RouteShaped(name string, s Shape) *RouteMetrics {
	if m == nil {
		return nil
	}
	return newRouteMetrics(m, name, s)
}

// Lookup counts one cache lookup. tier is TierL1 or TierL2; result is
// LookupHit, LookupMiss or LookupError. Known values take a pre-resolved
// child and do not allocate.
func (m *Metrics) Lookup(tier, result string) {
	if m == nil {
		return
	}
	i, j := indexOf(tiers[:], tier), indexOf(lookupResults[:], result)
	if i < 0 || j < 0 || m.lookup[i][j] == nil {
		m.lookups.WithLabelValues(tier, result).Inc()
		return
	}
	m.lookup[i][j].Inc()
}

// Invalidation counts n invalidations (tags or keys dropped) from source:
// SourceWrite, SourcePurge or SourcePeer.
func (m *Metrics) Invalidation(source string, n int) {
	if m == nil || n <= 0 {
		return
	}
	if i := indexOf(sources[:], source); i >= 0 && m.invalid[i] != nil {
		m.invalid[i].Add(float64(n))
		return
	}
	m.invalidations.WithLabelValues(source).Add(float64(n))
}

// ConfigReload counts one reload attempt.
func (m *Metrics) ConfigReload(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.reloadOK.Inc()
	} else {
		m.reloadFail.Inc()
	}
}

// ConfigReloadNeedsRestart counts a reload that applied what it could but
// found a change only a restart applies (a listen address, Redis, ...):
// the running process no longer matches its file until it restarts.
func (m *Metrics) ConfigReloadNeedsRestart() {
	if m == nil {
		return
	}
	m.reloadRestart.Inc()
}

// SetL2Up records whether Redis answers. sidecache_l2_up is absent until the
// first call, so an L1-only deployment does not look permanently degraded.
func (m *Metrics) SetL2Up(up bool) {
	if m == nil {
		return
	}
	v := int32(0)
	if up {
		v = 1
	}
	m.state.l2.Store(v)
}

// L1Source makes sidecache_l1_bytes and sidecache_l1_items report the
// values of bytes and items at scrape time. Calling it again (a rebuilt L1
// after reload) replaces the source; nil functions remove the series.
// The gauges are absent until the first call, as L1 may be disabled.
func (m *Metrics) L1Source(bytes, items func() int64) {
	if m == nil {
		return
	}
	if bytes == nil || items == nil {
		m.state.l1.Store(nil)
		return
	}
	m.state.l1.Store(&l1Source{bytes: bytes, items: items})
}

func indexOf(list []string, v string) int {
	for i, s := range list {
		if s == v {
			return i
		}
	}
	return -1
}

type l1Source struct{ bytes, items func() int64 }

// L2Source makes sidecache_l2_clock_offset_seconds,
// sidecache_l2_epoch_refusals_total and sidecache_l2_writes_refused report
// offset (Redis's clock less this replica's, at the last heartbeat),
// refusals (epoch raises Redis answered with an error) and writesRefused
// (Redis answers but refuses every write) at scrape time. Absent until
// the first call, as L2 may be disabled.
func (m *Metrics) L2Source(offset func() time.Duration, refusals func() uint64, writesRefused func() bool) {
	if m == nil || offset == nil || refusals == nil || writesRefused == nil {
		return
	}
	m.state.l2src.Store(&l2Source{offset: offset, refusals: refusals, writesRefused: writesRefused})
}

type l2Source struct {
	offset        func() time.Duration
	refusals      func() uint64
	writesRefused func() bool
}

// stateCollector reports gauges whose value lives elsewhere (the L1 store's
// counters) or that must stay absent until first set (L2 reachability).
type stateCollector struct {
	l1Bytes, l1Items, l2Up *prometheus.Desc
	l2Offset, l2Refusals   *prometheus.Desc
	l2WritesRefused        *prometheus.Desc

	l1    atomic.Pointer[l1Source]
	l2    atomic.Int32 // -1 unset, 0 down, 1 up
	l2src atomic.Pointer[l2Source]
}

func newStateCollector() *stateCollector {
	s := &stateCollector{
		l1Bytes: prometheus.NewDesc(namespace+"_l1_bytes",
			"Bytes held by the in-process cache.", nil, nil),
		l1Items: prometheus.NewDesc(namespace+"_l1_items",
			"Entries held by the in-process cache.", nil, nil),
		l2Up: prometheus.NewDesc(namespace+"_l2_up",
			"1 while Redis answers, 0 while L2 is degraded.", nil, nil),
		l2Offset: prometheus.NewDesc(namespace+"_l2_clock_offset_seconds",
			"Redis's clock less this replica's, measured on the last heartbeat; past max_lag/4 either way L2 is not used.", nil, nil),
		l2Refusals: prometheus.NewDesc(namespace+"_l2_epoch_refusals_total",
			"Epoch raises of writes that Redis answered with an error; each makes every replica refetch entries older than max_lag.", nil, nil),
		l2WritesRefused: prometheus.NewDesc(namespace+"_l2_writes_refused",
			"1 while Redis answers but refuses every write (MISCONF, NOREPLICAS, READONLY, OOM): L2 is read, nothing is stored in it, no epoch is raised.", nil, nil),
	}
	s.l2.Store(-1)
	return s
}

func (s *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.l1Bytes
	ch <- s.l1Items
	ch <- s.l2Up
	ch <- s.l2Offset
	ch <- s.l2Refusals
	ch <- s.l2WritesRefused
}

func (s *stateCollector) Collect(ch chan<- prometheus.Metric) {
	if src := s.l1.Load(); src != nil {
		ch <- prometheus.MustNewConstMetric(s.l1Bytes, prometheus.GaugeValue, float64(src.bytes()))
		ch <- prometheus.MustNewConstMetric(s.l1Items, prometheus.GaugeValue, float64(src.items()))
	}
	if v := s.l2.Load(); v >= 0 {
		ch <- prometheus.MustNewConstMetric(s.l2Up, prometheus.GaugeValue, float64(v))
	}
	if src := s.l2src.Load(); src != nil {
		ch <- prometheus.MustNewConstMetric(s.l2Offset, prometheus.GaugeValue, src.offset().Seconds())
		ch <- prometheus.MustNewConstMetric(s.l2Refusals, prometheus.CounterValue, float64(src.refusals()))
		refused := 0.0
		if src.writesRefused() {
			refused = 1
		}
		ch <- prometheus.MustNewConstMetric(s.l2WritesRefused, prometheus.GaugeValue, refused)
	}
}
