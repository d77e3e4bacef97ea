package proxy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/route"
)

// twoLists sends two split lists at once and returns their answers. The
// batch route's max_size is the number of distinct ids of both, and its
// max_wait a minute: one shared bulk call, sent when both lists have
// enlisted, with the headers of whichever came first. Its answers are
// private (the origin's choice), so the other list's ids are foreign and
// fetched again in a call of its own (fetchForeign): which list that is
// does not matter to the tests, which hold both lists to the same rule.
func twoLists(ctx context.Context, e *env, a, b string) [2]answer {
	var got [2]answer
	var wg sync.WaitGroup
	for i, q := range []string{a, b} {
		wg.Go(func() { got[i] = fetch(ctx, e.front.URL+"/users?ids="+q, nil) })
	}
	wg.Wait()
	return got
}

// TestSplitForeignStaleIfError: a list's id whose batched answer was made
// for another request (private) is fetched again on the list's own call;
// when that call fails, the id's stale copy held for stale_if_error is
// served, as it is when the batched call itself fails (TestSplitStale).
// The own call's failure answered the list 502.
func TestSplitForeignStaleIfError(t *testing.T) {
	var phase2 atomic.Bool
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		switch {
		case !phase2.Load():
			usersAnswer(func(string) bool { return true })(w, r, ids)
		case len(ids) == 4: // the shared call: private answers
			w.Header().Set("Cache-Control", "private, max-age=60")
			usersAnswer(func(string) bool { return true }, "X-Phase")(w, r, ids)
		default: // a list's own call
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	c := &clock{}
	rt := userRoute(4, time.Minute)
	rt.TTL, rt.StaleIfError = time.Second, time.Hour
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
	e := newEnv(t, o.upstream, []testRoute{rt, list}, withClock(c))
	ctx := context.Background()
	for _, a := range twoLists(ctx, e, "1,2", "3,4") {
		if a.err != nil || a.code != 200 {
			t.Fatalf("priming: %d %v", a.code, a.err)
		}
	}
	c.advance(2 * time.Second) // stale, within stale-if-error
	phase2.Store(true)
	before := len(o.snapshot())
	got := twoLists(ctx, e, "1,2", "3,4")
	stale := 0
	for i, q := range [][2]string{{"1", "2"}, {"3", "4"}} {
		a := got[i]
		want := "[" + userJSON(q[0], nil) + "," + userJSON(q[1], nil) + "]"
		if a.err != nil || a.code != 200 {
			t.Errorf("list %v: %d %q %v (%s), want 200", q, a.code, a.body, a.err, a.header.Get("Cache-Status"))
			continue
		}
		if strings.Contains(a.header.Get("Cache-Status"), "stale=2") {
			stale++
			if a.body != want {
				t.Errorf("list %v: stale answer %q, want the stale copies %q", q, a.body, want)
			}
		}
	}
	if stale != 1 {
		t.Errorf("%d lists answered stale=2, want 1 (the one whose own call failed)", stale)
	}
	if n := len(o.snapshot()) - before; n != 2 {
		t.Errorf("%d bulk calls, want 2: the shared one, then the foreign list's own", n)
	}
}

// TestSplitForeignElementOverMaxBody: lists holding a record too large to
// keep pass through to the upstream's list, as a batched call over its
// bound does (TestBatchElementOverMaxBody): a list's foreign ids whose own
// call was over its bound answered 502. A bulk answer is now bounded by
// max_body_bytes, not max_body_bytes × ids (D3), so the shared call is
// over it too, and each list passes through from its own call: a list
// holding 7 is over the bound whole, and is never assembled.
func TestSplitForeignElementOverMaxBody(t *testing.T) {
	const maxBody = 4 << 10
	big := strings.Repeat("x", 3*maxBody)
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		out := make([]map[string]string, 0, len(ids))
		for _, id := range ids {
			el := map[string]string{"id": id, "name": "user-" + id}
			if id == "7" {
				el["blob"] = big
			}
			out = append(out, el)
		}
		w.Header().Set("Cache-Control", "private, max-age=60")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	// Both lists hold 7: the shared call (5 ids) is over its bound, and
	// so is each list's own call (3 ids). The batch goes on its timer (a
	// hang guard: both lists are sent at once), never when full: a list
	// filling it before it enlisted 7 (map order) sent it without 7,
	// which then went alone, in no list's shared call.
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
	e := newEnv(t, o.upstream, []testRoute{userRoute(6, 3*time.Second), list}, func(po *proxyOptions, _ *l1.Store) {
		po.MaxBodyBytes = maxBody
	})
	got := twoLists(context.Background(), e, "1,2,7", "3,4,7")
	passed := 0
	for i, q := range []string{"1,2,7", "3,4,7"} {
		a := got[i]
		if a.err != nil || a.code != 200 || !strings.Contains(a.body, big) {
			t.Errorf("list %s: %d %.80q %v (%s), want 200 with the whole record", q, a.code, a.body, a.err, a.header.Get("Cache-Status"))
			continue
		}
		if strings.Contains(a.header.Get("Cache-Status"), "detail=too-large") {
			passed++
		}
	}
	if passed != 2 {
		t.Errorf("%d lists passed through (detail=too-large), want 2 (each over the bound whole)", passed)
	}
}

// TestSplitElementOverMaxBodyHeldStale: a list's id whose record grew
// over max_body_bytes while a stale copy was held for stale_if_error
// passes the list through to the upstream's list, as GET of the id alone
// passes through (join: a record too large to keep is no upstream
// failure, RFC 5861 §4's "error"): the list served the stale copies.
func TestSplitElementOverMaxBodyHeldStale(t *testing.T) {
	const maxBody = 4 << 10
	big := strings.Repeat("x", 3*maxBody)
	var grown atomic.Bool
	element := func(id string) map[string]string {
		el := map[string]string{"id": id, "name": "user-" + id}
		if id == "7" && grown.Load() {
			el["blob"] = big
		}
		return el
	}
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		out := make([]map[string]string, 0, len(ids))
		for _, id := range ids {
			out = append(out, element(id))
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}, func(w http.ResponseWriter, r *http.Request) { // the pass-through of GET /users/7
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(element(strings.TrimPrefix(r.URL.Path, "/users/")))
	})
	c := &clock{}
	rt := userRoute(10, time.Millisecond)
	rt.TTL, rt.StaleIfError = time.Second, time.Hour
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
	e := newEnv(t, o.upstream, []testRoute{rt, list}, withClock(c), func(po *proxyOptions, _ *l1.Store) {
		po.MaxBodyBytes = maxBody
	})
	ctx := context.Background()
	if a := fetch(ctx, e.front.URL+"/users?ids=6,7", nil); a.err != nil || a.code != 200 {
		t.Fatalf("priming: %d %v", a.code, a.err)
	}
	c.advance(2 * time.Second) // stale, within stale-if-error
	grown.Store(true)
	for _, path := range []string{"/users/7", "/users?ids=6,7"} {
		a := fetch(ctx, e.front.URL+path, nil)
		if a.err != nil || a.code != 200 || !strings.Contains(a.body, big) {
			t.Errorf("GET %s: %d %.80q %v (%s), want the grown record", path, a.code, a.body, a.err, a.header.Get("Cache-Status"))
			continue
		}
		if cs := a.header.Get("Cache-Status"); !strings.Contains(cs, "detail=too-large") {
			t.Errorf("GET %s: Cache-Status %q, want detail=too-large", path, cs)
		}
	}
}
