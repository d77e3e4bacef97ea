package proxy_test

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/route"
)

// TestOwnCallsWithinRouteBound: the bulk calls a member of a batch makes
// for itself, when the batch's answer was made for another request
// (private: fetchOwnID for a one-id miss, fetchForeign for a list), are
// bulk calls of the route like any other, and batch.max_route_in_flight
// bounds them with the batches'. Before, they went outside the batcher:
// a batch of four clients' requests whose answer was private sent its
// three other members' own calls at once, three calls in flight on a
// route bounded at one.
//
// The origin holds each call after the first until the test lets it go,
// or until a second call is in flight beside it (the bound broken): the
// test lets them go once the two calls the bound keeps out wait in the
// batcher's line, so that nothing is timed.
func TestOwnCallsWithinRouteBound(t *testing.T) {
	var inFlight, most, calls atomic.Int64
	release := make(chan struct{})
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if calls.Add(1) > 1 {
		held:
			for inFlight.Load() < 2 {
				select {
				case <-release:
					break held
				case <-time.After(time.Millisecond):
				}
			}
		}
		w.Header().Set("Cache-Control", "private, max-age=60")
		usersAnswer(func(string) bool { return true }, "X-Forwarded-For")(w, r, ids)
	})
	rt := userRoute(5, time.Minute) // the batch goes once it holds the 5 ids below
	rt.Batch.MaxInFlight, rt.Batch.MaxRouteInFlight = 1, 1
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
	e := newEnv(t, o.upstream, []testRoute{rt, list})
	clients := []struct{ addr, path string }{
		{"127.0.0.2", "/users/201"},
		{"127.0.0.3", "/users/202"},
		{"127.0.0.4", "/users/203"},
		{"127.0.0.5", "/users?ids=204,205"},
	}
	got := make([]answer, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() { got[i] = fetchFrom(c.addr, e.front.URL+c.path, "ua") })
	}
	waitFor(t, func() bool {
		return most.Load() > 1 || calls.Load() == 2 && e.h.BatchInLine("user") == 2
	})
	close(release)
	wg.Wait()
	if m := most.Load(); m > 1 {
		t.Errorf("%d bulk calls in flight at once on a route with max_route_in_flight 1", m)
	}
	for i, c := range clients {
		a := got[i]
		if a.err != nil || a.code != http.StatusOK {
			t.Errorf("client %s %s: %d %v", c.addr, c.path, a.code, a.err)
			continue
		}
		if strings.Count(a.body, `"x-forwarded-for":"`+c.addr+`"`) != strings.Count(a.body, `"id":`) {
			t.Errorf("client %s %s: %s: an element made for another client", c.addr, c.path, a.body)
		}
	}
	if n := calls.Load(); n != int64(len(clients)) {
		t.Errorf("%d bulk calls, want %d (the shared one, then one per client but the opener)", n, len(clients))
	}
}
