package proxy_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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
		<-release
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
	<-arrived
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
