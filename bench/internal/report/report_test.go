package report

import (
	"bytes"
	"image/png"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/sidecache/sidecache/bench/internal/lab"
	"github.com/sidecache/sidecache/bench/internal/load"
)

// fakeOutcome is 100 results through vegeta's Metrics, as a run makes
// them: latencies p99/100 … p99, over one second, every one a 200 the
// row accepts.
func fakeOutcome(tps float64, p99 time.Duration) *load.Outcome {
	o := &load.Outcome{}
	start := time.Unix(1e9, 0)
	for i := range 100 {
		o.Metrics.Add(&vegeta.Result{Code: 200, Timestamp: start.Add(time.Duration(i) * 10 * time.Millisecond),
			Latency: p99 * time.Duration(i+1) / 100})
		o.OK++
	}
	o.Metrics.Close()
	o.Elapsed = time.Duration(float64(time.Second) * 100 / tps) // so TPS() == tps
	return o
}

func wl(t *testing.T, name string) load.Workload {
	w, err := load.PickWorkloads([]string{name})
	if err != nil {
		t.Fatal(err)
	}
	return w[0]
}

func TestReportTargets(t *testing.T) {
	rows, _ := load.PickWorkloads([]string{"clients-get", "users-get"})
	r := &Report{
		Params: lab.Params{Configs: []string{"direct", "cache", "batch"}, Rows: rows, Workers: 10, Duration: time.Second},
		Results: lab.Results{
			Failed: map[string]string{},
			Rows: []lab.RowResult{
				{Config: "direct", Workload: wl(t, "clients-get"), Out: fakeOutcome(1000, 50*time.Millisecond), Upstream: 1000},
				{Config: "cache", Workload: wl(t, "clients-get"), Out: fakeOutcome(25000, 8*time.Millisecond)},
				{Config: "direct", Workload: wl(t, "users-get"), Out: fakeOutcome(1000, 50*time.Millisecond)},
				{Config: "batch", Workload: wl(t, "users-get"), Out: fakeOutcome(3000, 50*time.Millisecond),
					Upstream: 40, UpstreamPer: map[string]int64{"GET /users": 30, "GET /clients/{id}": 10}},
			},
			Peers: []lab.PeerResult{
				{Test: "pass", Server: "sidecache (no routes)", Out: fakeOutcome(9000, time.Millisecond)},
				{Test: "pass", Server: "nginx proxy_pass", Out: fakeOutcome(8000, time.Millisecond)},
				{Test: "hit", Server: "sidecache (L1 hit)", Out: fakeOutcome(20000, time.Millisecond)},
				{Test: "hit", Server: "nginx proxy_cache", Missing: "not measured (not installed)"},
				{Test: "hit", Server: "bare Go (from memory)", Out: fakeOutcome(30000, time.Millisecond)},
			},
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
		"| configuration | row | TPS | bulk calls/s | requests per bulk call | p99 | errors |",
		"| batch | GET /users/{id} | 3,000 | 900 | 3.3 | ",
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
	if got := codesString(map[string]int{"404": 2, "200": 10, "0": 1}); got != "0:1 200:10 404:2" {
		t.Errorf("codesString = %q", got)
	}
	if got := niceCeil(1234); got != 1600 {
		t.Errorf("niceCeil(1234) = %v", got)
	}
}
