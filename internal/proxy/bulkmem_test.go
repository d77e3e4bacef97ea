package proxy_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/route"
)

// bigRecords is an origin whose records are large next to max_body_bytes:
// each a quarter of it (so max_size of them together are far over it),
// and id 7's three times over it (no call can keep it). It answers bulk
// calls and per-ID GETs with the same records.
func bigRecords(t *testing.T, maxBody int) (*bulkOrigin, func(id string) string) {
	record := func(id string) string {
		n := maxBody / 4
		if id == "7" {
			n = 3 * maxBody
		}
		b, _ := json.Marshal(map[string]string{"id": id, "blob": strings.Repeat(id[:1], n)})
		return string(b)
	}
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		elems := make([]string, len(ids))
		for i, id := range ids {
			elems[i] = record(id)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("[" + strings.Join(elems, ",") + "]"))
	}, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(record(strings.TrimPrefix(r.URL.Path, "/users/"))))
	})
	return o, record
}

// TestBulkAnswerHeldWithinMaxBody (D3): a bulk answer is one response, so
// the sidecar holds at most max_body_bytes of it. 20 concurrent misses of
// records a quarter of max_body_bytes each fill one batch whose answer is
// five times the bound: it held all of it (max_body_bytes × ids, up to
// 256 MiB a call; the prober's 100 misses of 2 MB records took RSS from
// 23 to 506 MB). Now the call is read no further than the bound and each
// request's id is asked for again alone: every request still gets its
// own record, each stored, and the one record over the bound alone (7)
// streams through uncached. The route never held more than the bound.
func TestBulkAnswerHeldWithinMaxBody(t *testing.T) {
	const maxBody, n = 64 << 10, 20
	o, record := bigRecords(t, maxBody)
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
	// The batch goes when full: n distinct ids, one call.
	e := newEnv(t, o.upstream, []testRoute{userRoute(n, time.Minute), list}, func(po *proxyOptions, _ *l1.Store) {
		po.MaxBodyBytes = maxBody
	})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := strconv.Itoa(i)
			r, b := e.get("/users/" + id)
			if r.StatusCode != 200 || strings.TrimSpace(b) != record(id) {
				t.Errorf("GET /users/%s: %d %.60q (%s), want its record", id, r.StatusCode, b, r.Header.Get("Cache-Status"))
			}
			cs := r.Header.Get("Cache-Status")
			if large := strings.Contains(cs, "detail=too-large"); large != (id == "7") {
				t.Errorf("GET /users/%s: Cache-Status %q: too-large %v, want %v", id, cs, large, id == "7")
			}
		}()
	}
	wg.Wait()
	// One call holds at most max_body_bytes (+1, to tell it is over),
	// the route at most its max_in_flight calls' (one group, 2).
	if all, one := e.h.HeldPeak("user"); one > maxBody+1 || all > 2*(maxBody+1) {
		t.Errorf("the route held %d bytes of bulk answers at once, %d in one call: over max_body_bytes (%d) a call, 2 calls' in all", all, one, maxBody)
	}
	calls := o.snapshot()
	if len(calls) != 1+n || len(calls[0].ids) != n {
		t.Errorf("%d bulk calls (first of %d ids), want 1 of %d, then one per request", len(calls), len(calls[0].ids), n)
	}
	if got := counter(t, e.reg, "sidecache_batch_too_large_total", "kind", "answer"); got != 2 {
		t.Errorf("sidecache_batch_too_large_total{kind=answer} = %v, want 2 (the shared call, 7's own)", got)
	}
	// Stored: a hit each, without a call; 7 passes (hit-for-pass),
	// never again in a bulk call it would make too large for the others.
	o.reset()
	for _, id := range []string{"0", "13", "19", "7"} {
		want := "hit"
		if id == "7" {
			want = "detail=hit-for-pass"
		}
		if r, b := e.get("/users/" + id); r.StatusCode != 200 || !strings.Contains(r.Header.Get("Cache-Status"), want) || strings.TrimSpace(b) != record(id) {
			t.Errorf("GET /users/%s again: %d (%s), want %s", id, r.StatusCode, r.Header.Get("Cache-Status"), want)
		}
	}
	if calls := o.snapshot(); len(calls) != 0 {
		t.Errorf("%d bulk calls for stored records", len(calls))
	}
}

// TestSplitListHeldWithinMaxBody (D3): a split list is one response too.
// A list whose elements together are over max_body_bytes held all of them
// and assembled (and gzip-coded) the whole array in memory: the prober's
// 100-id list of 2 MB records peaked at 803 MB. Now it passes through to
// the upstream's list, streamed, whether its elements are cached or not,
// and neither route holds more than the bound of it. A list within the
// bound is still reassembled.
func TestSplitListHeldWithinMaxBody(t *testing.T) {
	const maxBody, n = 64 << 10, 20
	o, record := bigRecords(t, maxBody)
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
	e := newEnv(t, o.upstream, []testRoute{userRoute(n, time.Millisecond), list}, func(po *proxyOptions, _ *l1.Store) {
		po.MaxBodyBytes = maxBody
	})
	ids := make([]string, 0, n)
	want := make([]string, 0, n)
	for i := 10; len(ids) < n; i++ { // two-digit ids, none of them 7
		ids = append(ids, strconv.Itoa(i))
		want = append(want, record(strconv.Itoa(i)))
	}
	whole := "[" + strings.Join(want, ",") + "]"
	for round := range 2 { // its elements missing, then cached
		r, b := e.get("/users?ids=" + strings.Join(ids, ","))
		if r.StatusCode != 200 || b != whole {
			t.Fatalf("round %d: list of %d: %d %.60q (%s), want the upstream's whole list", round, n, r.StatusCode, b, r.Header.Get("Cache-Status"))
		}
		if cs := r.Header.Get("Cache-Status"); !strings.Contains(cs, "detail=too-large") {
			t.Errorf("round %d: Cache-Status %q, want detail=too-large", round, cs)
		}
		for _, id := range ids[:4] { // cache some for the next round
			_, _ = e.get("/users/" + id)
		}
	}
	// One list at a time: its answer and gzip copy, within 2 × the bound.
	if all, _ := e.h.HeldPeak("users-list"); all > 2*maxBody {
		t.Errorf("the list route held %d bytes of answer at once, over 2 × max_body_bytes (%d)", all, 2*maxBody)
	}
	if all, one := e.h.HeldPeak("user"); one > maxBody+1 || all > 2*(maxBody+1) {
		t.Errorf("the batch route held %d bytes of bulk answers at once, %d in one call: over max_body_bytes (%d) a call, 2 calls' in all", all, one, maxBody)
	}
	if got := counter(t, e.reg, "sidecache_batch_too_large_total", "kind", "list"); got != 2 {
		t.Errorf("sidecache_batch_too_large_total{kind=list} = %v, want 2", got)
	}
	// Within the bound: reassembled from the cache.
	r, b := e.get("/users?ids=" + strings.Join(ids[:3], ","))
	if r.StatusCode != 200 || b != "["+strings.Join(want[:3], ",")+"]" || !strings.Contains(r.Header.Get("Cache-Status"), "split hits=3") {
		t.Errorf("list of 3: %d %.60q (%s), want it reassembled from hits", r.StatusCode, b, r.Header.Get("Cache-Status"))
	}
}
