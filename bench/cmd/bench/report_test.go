package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// fakeOutcome is 100 results through vegeta's Metrics, as a run makes
// them: latencies p99/100 … p99, over one second.
func fakeOutcome(tps float64, p99 time.Duration) *outcome {
	o := &outcome{}
	start := time.Unix(1e9, 0)
	for i := range 100 {
		o.add(&vegeta.Result{Code: 200, Timestamp: start.Add(time.Duration(i) * 10 * time.Millisecond),
			Latency: p99 * time.Duration(i+1) / 100}, is(200))
	}
	o.Metrics.Close()
	o.Elapsed = time.Duration(float64(time.Second) * 100 / tps) // so TPS() == tps
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
	if got := codesString(map[string]int{"404": 2, "200": 10, "0": 1}); got != "0:1 200:10 404:2" {
		t.Errorf("codesString = %q", got)
	}
	if got := niceCeil(1234); got != 1600 {
		t.Errorf("niceCeil(1234) = %v", got)
	}
}

func TestBulkPathDistinct(t *testing.T) {
	key, _ := newKeyDist("zipf", 50)
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

// The vegeta attack against a real socket: counts, statuses and errors,
// closed and open loop.
func TestAttack(t *testing.T) {
	var calls atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1)%10 == 0 {
			w.WriteHeader(500)
			return
		}
		w.Header().Set("Cache-Status", "sidecache; hit")
		w.Write([]byte(`{"ok":true}`))
	}))
	defer ts.Close()
	next := func() request { return request{method: "GET", path: "/x"} }
	for _, rate := range []int{0, 200} {
		o := attack{base: ts.URL, workers: 4, duration: 300 * time.Millisecond, rate: rate, next: next, ok: is(200)}.run(context.Background())
		total := o.OK + o.Errors
		if o.OK == 0 || o.Errors == 0 || o.StatusCodes["500"] != o.Errors || o.StatusCodes["200"] != o.OK ||
			int(o.Requests) != total || o.Hits != o.OK {
			t.Errorf("rate %d: ok %d errors %d hits %d codes %v requests %d", rate, o.OK, o.Errors, o.Hits, o.StatusCodes, o.Requests)
		}
		if rate > 0 && total > rate { // 300ms at 200/s is about 60
			t.Errorf("open loop at %d/s sent %d in 300ms", rate, total)
		}
		if !strings.Contains(o.FirstErr, "status 500") {
			t.Errorf("first error %q", o.FirstErr)
		}
		if o.TPS() <= 0 || o.Latencies.P99 <= 0 || o.Latencies.P99 < o.Latencies.P50 {
			t.Errorf("rate %d: tps %v p50 %v p99 %v", rate, o.TPS(), o.Latencies.P50, o.Latencies.P99)
		}
	}
}

// Open loop against a server slower than the rate: the requests one worker
// could not send on time count their wait, and those never sent are
// dropped. Only lower bounds, which a loaded machine only makes larger.
func TestAttackOpenLoopCountsFromDue(t *testing.T) {
	const slow = 50 * time.Millisecond
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(slow)
	}))
	defer ts.Close()
	next := func() request { return request{method: "GET", path: "/"} }
	o := attack{base: ts.URL, workers: 1, duration: 400 * time.Millisecond, rate: 100, next: next, ok: is(200)}.run(context.Background())
	if o.Requests == 0 || o.Requests > 10 { // one worker, 50ms each: at most 8 sent, 40 due
		t.Fatalf("sent %d", o.Requests)
	}
	if o.Dropped < 40-int(o.Requests)-1 {
		t.Errorf("dropped %d of 40 due with %d sent", o.Dropped, o.Requests)
	}
	if o.Latencies.Max < 3*slow {
		t.Errorf("max latency %v: the wait behind a busy worker is not counted", o.Latencies.Max)
	}
}

// The targeter turns each workload into complete vegeta targets.
func TestTargeter(t *testing.T) {
	keys, err := newKeyDist("zipf", 100)
	if err != nil {
		t.Fatal(err)
	}
	p := workloadParams{keys: keys, bulk: 20}
	tests := []struct {
		row, method, prefix string
		body                bool
	}{
		{"clients-get", "GET", "/clients/", false},
		{"users-get", "GET", "/users/", false},
		{"users-bulk", "GET", "/users?ids=", false},
		{"clients-patch", "PATCH", "/clients/", true},
		{"clients-delete", "DELETE", "/clients/", false},
	}
	for _, tc := range tests {
		t.Run(tc.row, func(t *testing.T) {
			tr := newTargeter("http://127.0.0.1:1", wl(t, tc.row).make(p))
			for range 50 {
				var tg vegeta.Target
				if err := tr(&tg); err != nil {
					t.Fatal(err)
				}
				rest, ok := strings.CutPrefix(tg.URL, "http://127.0.0.1:1"+tc.prefix)
				if tg.Method != tc.method || !ok || rest == "" {
					t.Fatalf("target %s %s", tg.Method, tg.URL)
				}
				ids := strings.Split(rest, ",")
				if tc.row == "users-bulk" && len(ids) != 20 || tc.row != "users-bulk" && len(ids) != 1 {
					t.Fatalf("%s: %d ids", tg.URL, len(ids))
				}
				for _, id := range ids {
					if n, err := strconv.Atoi(id); err != nil || n < 1 || n > 100 {
						t.Fatalf("%s: id %q out of 1..100", tg.URL, id)
					}
				}
				if (tg.Body != nil) != tc.body || tc.body && (!json.Valid(tg.Body) || tg.Header.Get("Content-Type") != "application/json") {
					t.Fatalf("body %q header %v", tg.Body, tg.Header)
				}
				if _, err := tg.Request(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
