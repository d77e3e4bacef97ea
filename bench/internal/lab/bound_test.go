package lab

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func TestParseL1Gauges(t *testing.T) {
	text := `# HELP sidecache_l1_bytes Bytes held by L1.
# TYPE sidecache_l1_bytes gauge
sidecache_l1_bytes 3.3e+07
sidecache_l1_items 25012
sidecache_batch_size_sum{route="user"} 61000
sidecache_batch_size_sum{route="order"} 39
sidecache_batch_size_count{route="user"} 2440
sidecache_l1_bytes_other 7
`
	g, err := parseL1Gauges(text)
	if err != nil || g != (l1Gauges{bytes: 3.3e7, items: 25012, fetched: 61039}) {
		t.Errorf("parseL1Gauges = %+v, %v", g, err)
	}
	if _, err := parseL1Gauges("sidecache_l1_items 3\n"); err == nil {
		t.Error("metrics without sidecache_l1_bytes (L1 off) accepted")
	}
}

func TestCheckBound(t *testing.T) {
	const max = 1000.0
	for _, tc := range []struct {
		name string
		a, b l1Gauges
		ok   bool
	}{
		{"full and evicting", l1Gauges{bytes: 990, items: 99, fetched: 500}, l1Gauges{bytes: 995, items: 99, fetched: 600}, true},
		{"not full", l1Gauges{bytes: 500, items: 50, fetched: 500}, l1Gauges{bytes: 940, items: 50, fetched: 600}, false},
		{"still growing", l1Gauges{bytes: 950, items: 40, fetched: 40}, l1Gauges{bytes: 990, items: 99, fetched: 100}, false},
		{"nothing fetched", l1Gauges{bytes: 990, items: 99, fetched: 500}, l1Gauges{bytes: 990, items: 99, fetched: 500}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := checkBound(tc.a, tc.b, max); (err == nil) != tc.ok {
				t.Errorf("checkBound = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// fakeL1 is a sidecar's /users/{id} and /metrics as the bound row reads
// them: each new id fetched and stored, the L1 holding at most limit
// items of 1,000 bytes (evicting beyond).
type fakeL1 struct {
	mu             sync.Mutex
	fetched, limit int
	seen           map[string]bool
	repeats        int
}

func (f *fakeL1) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Path == "/metrics" {
		items := min(f.fetched, f.limit)
		fmt.Fprintf(w, "sidecache_l1_bytes %d\nsidecache_l1_items %d\nsidecache_batch_size_sum{route=\"user\"} %d\n", 1000*items, items, f.fetched)
		return
	}
	id, ok := strings.CutPrefix(r.URL.Path, "/users/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	if f.seen[id] {
		f.repeats++
	}
	f.seen[id] = true
	f.fetched++
}

// TestBoundRowPrep: the first prep fills the L1 and turns it over once,
// every later one records the round's start, after records its end, and
// the note gives the L1's state; no id is requested twice. An L1 that
// stops filling below its bound fails the prep.
func TestBoundRowPrep(t *testing.T) {
	f := &fakeL1{limit: 600, seen: map[string]bool{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	s := &sut{addr: strings.TrimPrefix(srv.URL, "http://"), admin: srv.URL}
	b := &boundRow{ctx: t.Context(), cold: newColdIDs(10), max: 600 * 1000, chunk: 100}
	if err := b.prep(s); err != nil {
		t.Fatal(err)
	}
	// 100 at a time until 95 % of 600 items, then 600 more.
	if b.filledAt != 600 || b.warmed != 1200 || f.fetched != 1200 {
		t.Fatalf("filled at %d, warmed %d, fetched %d", b.filledAt, b.warmed, f.fetched)
	}
	for range 2 {
		if err := b.prep(s); err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		f.fetched += 300 // the round's misses
		f.mu.Unlock()
		if err := b.after(s); err != nil {
			t.Fatal(err)
		}
	}
	if f.repeats != 0 || b.topUps != 0 {
		t.Errorf("%d ids requested twice, %d top-ups", f.repeats, b.topUps)
	}
	note := b.note()
	for _, want := range []string{
		"before the first round 1200 cold ids, the L1 full (sidecache_l1_bytes ≥ 95 % of its bound) after 600 of them",
		"at each round's start sidecache_l1_bytes 0.6 MiB (100.0 % of the bound), sidecache_l1_items 600",
		"during the rounds 600 ids fetched and stored while 600 entries were evicted",
	} {
		if !strings.Contains(note, want) {
			t.Errorf("the note lacks %q: %s", want, note)
		}
	}

	stuck := &boundRow{ctx: t.Context(), cold: newColdIDs(10), max: 2 * 600 * 1000, chunk: 100}
	if err := stuck.prep(s); err == nil || !strings.Contains(err.Error(), "stopped filling") {
		t.Errorf("an L1 that cannot reach its bound: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := (&boundRow{ctx: ctx, cold: newColdIDs(10), max: 1}).send(s, 10); err == nil {
		t.Error("send on a cancelled context reported success")
	}
}
