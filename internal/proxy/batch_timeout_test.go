package proxy_test

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/route"
)

// TestBatchTimeoutIs504: a bulk call that runs out of upstream.timeout is
// an upstream timeout, answered 504 like any other (RFC 9110 §15.6.5), to
// a batched one-id miss and to a split list alike: 502 said the upstream
// was broken when it was only slow (a healthy bulk endpoint on a loaded
// machine), and a batch not sent in time already answered 504. The
// origin holds every bulk call until the test ends, so the sidecar's
// timeout always cuts it: no timing is asserted. Nothing is stored, and
// the 504 carries no upstream body.
func TestBatchTimeoutIs504(t *testing.T) {
	var reached atomic.Int64
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		reached.Add(1)
		select {
		case <-r.Context().Done(): // the sidecar's upstream.timeout
		case <-t.Context().Done():
		}
	})
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user", MaxIDs: 100}}
	e := newEnv(t, o.upstream, []testRoute{userRoute(10, time.Millisecond), list},
		func(o *proxyOptions, _ *l1.Store) { o.Timeout = 200 * time.Millisecond })
	for _, path := range []string{"/users/1", "/users?ids=2,3"} {
		before := reached.Load()
		r, body := e.get(path)
		if r.StatusCode != http.StatusGatewayTimeout {
			t.Errorf("GET %s over a bulk call that timed out: %d %q, want 504", path, r.StatusCode, body)
		}
		if body != "upstream timeout\n" {
			t.Errorf("GET %s: body %q, want the sidecar's own", path, body)
		}
		if cs := r.Header.Get("Cache-Status"); !strings.Contains(cs, "fwd=miss") {
			t.Errorf("GET %s: Cache-Status %q, want fwd=miss", path, cs)
		}
		if n := reached.Load() - before; n != 1 {
			t.Errorf("GET %s: %d bulk calls, want 1 (a timeout is not retried)", path, n)
		}
	}
	if n := e.l1.Items(); n != 0 {
		t.Errorf("l1 holds %d entries after bulk calls that timed out", n)
	}
}

// TestBatchOwnCallTimeoutIs504: a list whose ids a shared bulk call
// answered for another request (a private answer) fetches them again with
// its own headers (fetchForeign); that call running out of
// upstream.timeout is a timeout too: 504, not 502. Two lists from two
// addresses fill one batch (max_size 3, no timer); the origin answers the
// shared call, private, and holds every later call until the sidecar's
// timeout cuts it. Whichever list opened the batch gets its 200; the other
// its own call's 504.
func TestBatchOwnCallTimeoutIs504(t *testing.T) {
	var calls atomic.Int64
	answerAll := usersAnswer(func(string) bool { return true }, "X-Forwarded-For")
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		if calls.Add(1) > 1 {
			select {
			case <-r.Context().Done():
			case <-t.Context().Done():
			}
			return
		}
		w.Header().Set("Cache-Control", "private, max-age=60")
		answerAll(w, r, ids)
	})
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
	e := newEnv(t, o.upstream, []testRoute{userRoute(3, time.Minute), list},
		func(o *proxyOptions, _ *l1.Store) { o.Timeout = 300 * time.Millisecond })
	paths := []string{"/users?ids=1,2", "/users?ids=3"}
	got := make([]answer, len(paths))
	var wg sync.WaitGroup
	for i, p := range paths {
		wg.Go(func() { got[i] = fetchFrom("127.0.0."+strconv.Itoa(2+i), e.front.URL+p, "ua") })
	}
	wg.Wait()
	codes := map[int]int{}
	for i, a := range got {
		if a.err != nil {
			t.Fatalf("GET %s: %v", paths[i], a.err)
		}
		codes[a.code]++
		if a.code != http.StatusOK && a.body != "upstream timeout\n" {
			t.Errorf("GET %s: %d %q, want the sidecar's own timeout body", paths[i], a.code, a.body)
		}
	}
	if codes[http.StatusOK] != 1 || codes[http.StatusGatewayTimeout] != 1 {
		t.Errorf("statuses %v, want one 200 (the opener's) and one 504 (its own call timed out)", codes)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d bulk calls, want 2 (the shared one, the other list's own)", n)
	}
}
