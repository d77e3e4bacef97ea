package resend_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sidecache/sidecache/internal/resend"
)

// upstream is a real server that answers "ok" until hang is set, then
// reads each request and closes its connection without answering (as
// an origin that crashes on a request does). It counts the requests it
// read and the connections it accepted.
type upstream struct {
	*httptest.Server
	hang     atomic.Int64 // hang up on this many more requests; <0: on all
	requests atomic.Int64
	conns    atomic.Int64
	// gate, when set, holds each request until all it counts arrived.
	gate atomic.Pointer[sync.WaitGroup]
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g := u.gate.Load(); g != nil {
			g.Done()
			g.Wait()
			fmt.Fprint(w, "ok")
			return
		}
		u.requests.Add(1)
		if n := u.hang.Load(); n < 0 || n > 0 && u.hang.CompareAndSwap(n, n-1) {
			c, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			c.Close()
			return
		}
		fmt.Fprint(w, "ok")
	}))
	u.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.conns.Add(1)
		}
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

// warm leaves n idle keep-alive connections in rt's pool: n requests held
// at the upstream until all n have arrived, so each has its own.
func warm(t *testing.T, u *upstream, rt http.RoundTripper, n int) {
	t.Helper()
	var arrived sync.WaitGroup
	arrived.Add(n)
	u.gate.Store(&arrived)
	defer u.gate.Store(nil)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := get(rt, u.URL); err != nil {
				t.Errorf("warm: %v", err)
			}
		})
	}
	wg.Wait()
	if c := u.conns.Load(); c != int64(n) {
		t.Fatalf("warm: %d connections, want %d", c, n)
	}
}

func get(rt http.RoundTripper, url string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func transport() *http.Transport { return &http.Transport{MaxIdleConnsPerHost: 16} }

// An upstream that hangs up on every request is sent one request twice,
// not once per idle connection (http.Transport alone: 9 sends with 8 idle
// connections), and the rest of the pool stays usable.
func TestOnceStopsAtTheSecondSend(t *testing.T) {
	u := newUpstream(t)
	rt := resend.Once(transport())
	warm(t, u, rt, 8)
	u.requests.Store(0)
	u.hang.Store(-1)
	_, err := get(rt, u.URL)
	if !errors.Is(err, resend.ErrSpent) {
		t.Errorf("err = %v, want ErrSpent", err)
	}
	if n := u.requests.Load(); n != resend.MaxSends {
		t.Errorf("the upstream read the request %d times, want %d", n, resend.MaxSends)
	}
	// 8 idle: 2 hung up on, 1 closed unused; the next requests reuse the
	// other 5 rather than dial.
	u.hang.Store(0)
	conns := u.conns.Load()
	for range 3 {
		if body, err := get(rt, u.URL); err != nil || body != "ok" {
			t.Fatalf("after: %q %v", body, err)
		}
	}
	if d := u.conns.Load() - conns; d != 0 {
		t.Errorf("%d new connections after, want 0 (the idle pool was drained)", d)
	}
}

// The transport's own resend is kept: an upstream that closed one reused
// connection (the keep-alive race of RFC 9112 §9.3.1) costs the client
// nothing.
func TestOnceKeepsOneResend(t *testing.T) {
	u := newUpstream(t)
	rt := resend.Once(transport())
	warm(t, u, rt, 4)
	u.requests.Store(0)
	u.hang.Store(1)
	body, err := get(rt, u.URL)
	if err != nil || body != "ok" {
		t.Fatalf("got %q %v, want the answer to the resend", body, err)
	}
	if n := u.requests.Load(); n != 2 {
		t.Errorf("the upstream read the request %d times, want 2", n)
	}
}

// A request that is not resent is untouched: its body is read to the end
// after RoundTrip returned, and a fresh connection that fails is not
// resent (http.Transport's own rule).
func TestOnceFirstSend(t *testing.T) {
	u := newUpstream(t)
	rt := resend.Once(transport())
	if body, err := get(rt, u.URL); err != nil || body != "ok" {
		t.Fatalf("got %q %v", body, err)
	}
	rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	u.requests.Store(0)
	u.hang.Store(-1)
	if _, err := get(rt, u.URL); err == nil || errors.Is(err, resend.ErrSpent) {
		t.Errorf("err = %v, want the transport's own error", err)
	}
	if n := u.requests.Load(); n != 1 {
		t.Errorf("the upstream read the request %d times on a fresh connection, want 1", n)
	}
}
