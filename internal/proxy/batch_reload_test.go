package proxy_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// TestReloadKeepsBatchInFlightBound: a reload that leaves a batch route's
// batch settings as they were keeps its batcher (keptBatching), so the
// bulk calls in flight before it count against max_in_flight after it.
// Each reload made every batcher anew: a miss after it went upstream in a
// call of its own while the old batcher's call was still held, two calls
// of one group at once under max_in_flight 1 (and max_route_in_flight 1).
func TestReloadKeepsBatchInFlightBound(t *testing.T) {
	var inFlight, high atomic.Int64
	release := make(chan struct{})
	ok := usersAnswer(func(string) bool { return true })
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for h := high.Load(); n > h && !high.CompareAndSwap(h, n); h = high.Load() {
		}
		if len(ids) == 1 && ids[0] == "1" {
			select { // the call in flight across the reload
			case <-release:
			case <-t.Context().Done():
			}
		}
		ok(w, r, ids)
	})
	rt := userRoute(1, time.Millisecond)
	rt.Batch.MaxInFlight, rt.Batch.MaxRouteInFlight = 1, 1
	e := newEnv(t, o.upstream, []testRoute{rt})

	first := make(chan answer, 1)
	go func() { first <- fetch(context.Background(), e.front.URL+"/users/1", nil) }()
	waitUntil(t, "the first bulk call at the origin", func() bool { return len(o.snapshot()) == 1 })

	e.h.SetRoutes(compile(t, []testRoute{rt})) // a reload of the same file (internal/server)

	second := make(chan answer, 1)
	go func() { second <- fetch(context.Background(), e.front.URL+"/users/2", nil) }()
	// Either the second id waits in the route's batcher behind the held
	// call, or its own call reached the origin beside it.
	waitUntil(t, "/users/2 queued or called", func() bool {
		return e.h.BatchQueued("user") == 1 || len(o.snapshot()) == 2
	})
	calls := len(o.snapshot())
	close(release)
	for _, ch := range []chan answer{first, second} {
		if a := <-ch; a.err != nil || a.code != http.StatusOK {
			t.Fatalf("answer: %d %v %q", a.code, a.err, a.body)
		}
	}
	if h := high.Load(); h > 1 || calls != 1 {
		t.Fatalf("%d bulk calls at once at the origin across a reload (%d made while the first was held), want at most max_in_flight 1", h, calls)
	}
	if n := len(o.snapshot()); n != 2 {
		t.Errorf("%d bulk calls, want 2 (one per id, max_size 1)", n)
	}
}
