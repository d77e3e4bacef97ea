package proxy_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The flight's tier read runs on the leading request's goroutine
// (coalesce.DoThen), but the upstream call does not: a leader whose client
// leaves while the upstream has not answered returns at once, and the
// fetch goes on and is stored for the next request.
func TestLeaderLeavesWhileUpstreamHeld(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		held(t, release)
		w.Write([]byte("fetched"))
	})
	e := newEnv(t, up, []testRoute{clientRoute})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the servers close, should the test fail
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequest("GET", "http://api.example/clients/1", nil).WithContext(ctx)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		e.h.ServeHTTP(&discard{h: make(http.Header)}, req)
	}()
	await(t, arrived)
	cancel()
	select {
	case <-returned:
	case <-time.After(10 * time.Second): // only a hang gets here
		t.Fatal("the leader waited for the upstream after its client left")
	}
	unblock()
	for {
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, httptest.NewRequest("GET", "http://api.example/clients/1", nil))
		if cs := w.Header().Get("Cache-Status"); strings.Contains(cs, "hit") {
			if w.Body.String() != "fetched" || up.calls.Load() != 1 {
				t.Fatalf("hit %q after %d upstream calls", w.Body.String(), up.calls.Load())
			}
			return
		}
		// Not stored yet: the abandoned fetch is still on its way; a
		// request now joins it (no second call) or, once it ended,
		// hits.
		if up.calls.Load() != 1 {
			t.Fatalf("%d upstream calls: the abandoned fetch did not go on", up.calls.Load())
		}
		e.l1.Wait()
	}
}

// A batched miss's flight is finished by the batch (coalesce.Next.Handed), not
// by a goroutine of its own: its leader, whose client leaves while the
// bulk call is held, returns at once; a request that joins the flight
// after that gets the element when the batch answers, with no second
// call; and the element is stored for the next request.
func TestBatchedLeaderLeavesJoinerAnswered(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	good := usersAnswer(func(string) bool { return true })
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		close(arrived)
		held(t, release)
		good(w, r, ids)
	})
	e := newEnv(t, o.upstream, []testRoute{userRoute(10, time.Millisecond)})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the servers close, should the test fail
	const url = "http://api.example/users/7"

	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		e.h.ServeHTTP(&discard{h: make(http.Header)}, httptest.NewRequest("GET", url, nil).WithContext(ctx))
	}()
	await(t, arrived)
	cancel()
	select {
	case <-returned:
	case <-time.After(10 * time.Second): // only a hang gets here
		t.Fatal("the leader waited for the bulk call after its client left")
	}

	var joined atomic.Int64
	joiner := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, httptest.NewRequest("GET", url, nil).WithContext(joinCtx{context.Background(), &joined}))
		joiner <- w
	}()
	waitFor(t, func() bool { return joined.Load() >= 1 })
	unblock()
	w := <-joiner
	if w.Code != http.StatusOK || w.Body.String() != userJSON("7", nil) {
		t.Errorf("joiner got %d %q, want the element", w.Code, w.Body.String())
	}
	if calls := o.snapshot(); len(calls) != 1 {
		t.Fatalf("%d bulk calls, want 1: the joiner did not join the departed leader's flight", len(calls))
	}
	e.l1.Wait()
	w = httptest.NewRecorder()
	e.h.ServeHTTP(w, httptest.NewRequest("GET", url, nil))
	if cs := w.Header().Get("Cache-Status"); !strings.Contains(cs, "hit") || w.Body.String() != userJSON("7", nil) {
		t.Errorf("next request: %q %q, want a hit on the element", cs, w.Body.String())
	}
	if len(o.snapshot()) != 1 {
		t.Error("the departed leader's id was fetched again")
	}
}
