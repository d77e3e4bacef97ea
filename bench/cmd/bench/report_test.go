package main

import (
	"bytes"
	"context"
	"image/png"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	var l []time.Duration
	for i := 1; i <= 100; i++ {
		l = append(l, time.Duration(i)*time.Millisecond)
	}
	tests := []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.9, 90 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}}
	for _, tc := range tests {
		if got := quantile(l, tc.q); got != tc.want {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if quantile(nil, 0.5) != 0 {
		t.Error("quantile of nothing is not 0")
	}
}

func fakeOutcome(tps float64, p99 time.Duration) *outcome {
	o := &outcome{Elapsed: time.Second, OK: int(tps), Codes: map[int]int{200: int(tps)}}
	for i := 0; i < 100; i++ {
		o.Latencies = append(o.Latencies, p99*time.Duration(i+1)/100)
	}
	return o
}

func wl(t *testing.T, name string) workload {
	w, err := pickWorkloads(name)
	if err != nil {
		t.Fatal(err)
	}
	return w[0]
}

func TestReportTargets(t *testing.T) {
	rows, _ := pickWorkloads("clients-get,users-get")
	r := &report{
		Params:  params{Configs: []string{"direct", "cache", "batch"}, Rows: rows, Workers: 10, Duration: time.Second},
		Configs: map[string]string{},
		Rows: []rowResult{
			{Config: "direct", Workload: wl(t, "clients-get"), Out: fakeOutcome(1000, 50*time.Millisecond), Upstream: 1000},
			{Config: "cache", Workload: wl(t, "clients-get"), Out: fakeOutcome(25000, 8*time.Millisecond)},
			{Config: "direct", Workload: wl(t, "users-get"), Out: fakeOutcome(1000, 50*time.Millisecond)},
			{Config: "batch", Workload: wl(t, "users-get"), Out: fakeOutcome(3000, 50*time.Millisecond)},
		},
		Peers: []peerResult{
			{Test: "pass", Server: "sidecache (no routes)", Out: fakeOutcome(9000, time.Millisecond)},
			{Test: "pass", Server: "nginx proxy_pass", Out: fakeOutcome(8000, time.Millisecond)},
			{Test: "hit", Server: "sidecache (L1 hit)", Out: fakeOutcome(20000, time.Millisecond)},
			{Test: "hit", Server: "nginx proxy_cache", Missing: "not measured (not installed)"},
			{Test: "hit", Server: "bare Go (from memory)", Out: fakeOutcome(30000, time.Millisecond)},
		},
	}
	want := []string{"met", "met", "missed", "met", "not measured", "missed"}
	got := r.evalTargets()
	if len(got) != len(want) {
		t.Fatalf("%d targets, want %d", len(got), len(want))
	}
	for i, g := range got {
		if g.Verdict != want[i] {
			t.Errorf("target %q: %s (%s), want %s", g.Goal, g.Verdict, g.Measured, want[i])
		}
	}
	if !strings.Contains(got[0].Measured, "25.00×") || !strings.Contains(got[4].Measured, "not installed") {
		t.Errorf("measured texts: %q, %q", got[0].Measured, got[4].Measured)
	}

	md := r.markdown("chart.png")
	for _, s := range []string{
		"| Method | Endpoint | TPS | Avg | p50 | p90 | p95 | p99 | upstream calls/s | errors |",
		"| GET | /clients/{id} | 25,000 |",
		"| GET | /clients/{id} | 1,000 | ", // direct
		"| nginx proxy_cache | not measured (not installed) |",
		"| `GET /clients/{id}` with cache ≥ 20× direct TPS | 25.00× (25,000 vs 1,000 TPS) | **met** |",
		"![TPS and p99 per configuration](chart.png)",
		"| endpoint | direct | cache | batch |",
	} {
		if !strings.Contains(md, s) {
			t.Errorf("report lacks %q", s)
		}
	}

	var buf bytes.Buffer
	if err := drawChart(&buf, r); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != chartW || b.Dy() != 3*panelH {
		t.Errorf("chart %v, want %dx%d", b, chartW, 3*panelH)
	}
}

func TestFormatting(t *testing.T) {
	for in, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4200: "-4,200"} {
		if got := withCommas(in); got != want {
			t.Errorf("withCommas(%d) = %q, want %q", in, got, want)
		}
	}
	if got := codesString(map[int]int{404: 2, 200: 10}); got != "200:10 404:2" {
		t.Errorf("codesString = %q", got)
	}
	if got := niceCeil(1234); got != 1600 {
		t.Errorf("niceCeil(1234) = %v", got)
	}
}

func TestBulkPathDistinct(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	mk, _ := newKeyDist("zipf", 50)
	key := mk(rng)
	for range 100 {
		p := bulkPath(key, 20)
		ids := strings.Split(strings.TrimPrefix(p, "/users?ids="), ",")
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("%s repeats %s", p, id)
			}
			seen[id] = true
		}
	}
}

func TestQuickFlags(t *testing.T) {
	p, err := parseFlags([]string{"-quick", "-workers", "7"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Duration >= 10*time.Second || p.Workers != 7 || len(p.Steps) != 0 || p.Keys != 200 {
		t.Errorf("quick params: %+v", p)
	}
	if _, err := parseFlags([]string{"-configs", "direct,bogus"}); err == nil {
		t.Error("unknown configuration accepted")
	}
}

// The generator against a real socket: counts, statuses and errors.
func TestAttack(t *testing.T) {
	var calls atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1)%10 == 0 {
			w.WriteHeader(500)
			return
		}
		w.Write([]byte(`{"ok":true}`))
	}))
	defer ts.Close()
	addr := strings.TrimPrefix(ts.URL, "http://")
	next := func(*rand.Rand) targeter {
		return func(*rand.Rand) target { return target{method: "GET", path: "/x"} }
	}
	for _, rate := range []int{0, 200} {
		o := attack{addr: addr, workers: 4, duration: 300 * time.Millisecond, rate: rate, next: next, ok: is(200)}.run(context.Background())
		total := o.OK + o.Errors
		if o.OK == 0 || o.Errors == 0 || o.Codes[500] != o.Errors || o.Codes[200] != o.OK || len(o.Latencies) != total {
			t.Errorf("rate %d: ok %d errors %d codes %v latencies %d", rate, o.OK, o.Errors, o.Codes, len(o.Latencies))
		}
		if rate > 0 && total > rate { // 300ms at 200/s is about 60
			t.Errorf("open loop at %d/s sent %d in 300ms", rate, total)
		}
		if !strings.Contains(o.FirstErr, "status 500") {
			t.Errorf("first error %q", o.FirstErr)
		}
	}
}
