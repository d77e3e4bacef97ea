package load

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

func wl(t *testing.T, name string) Workload {
	w, err := PickWorkloads([]string{name})
	if err != nil {
		t.Fatal(err)
	}
	return w[0]
}

func TestBulkPathDistinct(t *testing.T) {
	key, _ := NewKeyDist("zipf", 50)
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
	next := func() Request { return Request{Method: "GET", Path: "/x"} }
	for _, rate := range []int{0, 200} {
		o := Attack{Base: ts.URL, Workers: 4, Duration: 300 * time.Millisecond, Rate: rate, Next: next, OK: is(200)}.Run(context.Background())
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
	next := func() Request { return Request{Method: "GET", Path: "/"} }
	o := Attack{Base: ts.URL, Workers: 1, Duration: 400 * time.Millisecond, Rate: 100, Next: next, OK: is(200)}.Run(context.Background())
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
	keys, err := NewKeyDist("zipf", 100)
	if err != nil {
		t.Fatal(err)
	}
	p := Params{Keys: keys, Bulk: 20}
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
			tr := newTargeter("http://127.0.0.1:1", wl(t, tc.row).Make(p))
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

// Each server's word for a hit: sidecache's Cache-Status, the NGINX
// config's X-Cache-Status and Varnish's two XIDs; a miss, a pass, a
// revalidation or no word at all is no hit.
func TestServedFromCache(t *testing.T) {
	for _, c := range []struct {
		name   string
		header http.Header
		want   bool
	}{
		{"sidecache hit", http.Header{"Cache-Status": {"sidecache; hit; ttl=30"}}, true},
		{"sidecache miss", http.Header{"Cache-Status": {"sidecache; fwd=miss; stored"}}, false},
		{"nginx hit", http.Header{"X-Cache-Status": {"HIT"}}, true},
		{"nginx miss", http.Header{"X-Cache-Status": {"MISS"}}, false},
		{"nginx revalidated", http.Header{"X-Cache-Status": {"REVALIDATED"}}, false},
		{"varnish hit", http.Header{"X-Varnish": {"32770 3"}}, true},
		{"varnish miss", http.Header{"X-Varnish": {"32770"}}, false},
		{"no word", http.Header{"Age": {"3"}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := servedFromCache(c.header); got != c.want {
				t.Errorf("servedFromCache(%v) = %v, want %v", c.header, got, c.want)
			}
		})
	}
}
