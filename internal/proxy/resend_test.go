package proxy_test

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// An upstream that reads a request and closes the connection without
// answering is sent it at most twice on the cached fill and on a bulk
// call: once, and once more because the connection was a reused one (RFC
// 9112 §9.3.1), never once per idle connection. http.Transport alone
// resent it on each of the 8 idle connections and a fresh one (9 calls
// for one client request: the invariant harness's budget violation).
func TestUpstreamHangupSentTwiceAtMost(t *testing.T) {
	for _, tc := range []struct{ name, path string }{
		{"cached fill", "/clients/99"},
		{"bulk call", "/users/99"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hang atomic.Bool
			var gate atomic.Pointer[sync.WaitGroup]
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				if g := gate.Load(); g != nil {
					g.Done()
					g.Wait() // all at once: one connection each
				}
				if hang.Load() {
					c, _, err := http.NewResponseController(w).Hijack()
					if err == nil {
						c.Close()
					}
					return
				}
				w.Header().Set("Cache-Control", "no-store")
				fmt.Fprint(w, `[]`)
			})
			e := newEnv(t, up, []testRoute{clientRoute, userRoute(1, time.Millisecond)})
			// 8 idle keep-alive connections in the sidecar's pool.
			const idle = 8
			var arrived sync.WaitGroup
			arrived.Add(idle)
			gate.Store(&arrived)
			var wg sync.WaitGroup
			for i := range idle {
				wg.Go(func() { e.get("/clients/" + strconv.Itoa(i)) })
			}
			wg.Wait()
			gate.Store(nil)

			hang.Store(true)
			before := up.calls.Load()
			r, _ := e.get(tc.path)
			if r.StatusCode != http.StatusBadGateway {
				t.Errorf("status %d, want 502", r.StatusCode)
			}
			if n := up.calls.Load() - before; n != 2 {
				t.Errorf("one client request cost %d upstream calls, want 2 (one resend)", n)
			}
		})
	}
}
