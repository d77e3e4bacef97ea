package proxy_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/route"
)

// TestBatchMissNotStarvedByList (prober's D1 starvation): a one-id miss
// that arrives behind a 1,000-id split list's ten queued bulk calls goes
// in one of the next calls made after it (the first or second; the third
// if a list call started as it arrived), ahead of the list's other
// batches, and is answered 200. It used to wait for all of the list's
// calls (two in flight at a time, 300 ms each) and failed 504 at its
// deadline (max_wait + upstream.timeout, 0.9 s).
func TestBatchMissNotStarvedByList(t *testing.T) {
	ok := usersAnswer(func(string) bool { return true })
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		time.Sleep(300 * time.Millisecond)
		ok(w, r, ids)
	})
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user", MaxIDs: 1000}}
	user := userRoute(100, 2*time.Millisecond)
	user.Batch.MaxInFlight = 2
	e := newEnv(t, o.upstream, []testRoute{user, list}, func(o *proxyOptions, _ *l1.Store) { o.Timeout = 900 * time.Millisecond })
	listDone := make(chan struct{})
	go func() {
		defer close(listDone)
		_, _ = getCtx(t.Context(), e, idsFrom(1000, 1000))
	}()
	waitUntil(t, "the list's first two calls", func() bool { return len(o.snapshot()) >= 2 })
	before := len(o.snapshot())
	r, _ := e.get("/users/5")
	if r.StatusCode != http.StatusOK {
		t.Errorf("GET /users/5 behind the list: status %d, want 200", r.StatusCode)
	}
	calls := o.snapshot()
	at := -1
	for i, c := range calls {
		if slices.Contains(c.ids, "5") {
			at = i
		}
	}
	if at < 0 || at > before+2 {
		t.Errorf("id 5 went in bulk call %d (0-based, of %d), want one of the three after the %d made before it arrived: it waited behind the list", at, len(calls), before)
	}
	<-listDone
}
