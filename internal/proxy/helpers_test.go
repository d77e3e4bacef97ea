package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sidecache/sidecache/internal/accesslog"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/edge"
	"github.com/sidecache/sidecache/internal/metrics"
	"github.com/sidecache/sidecache/internal/proxy"
)

// upstream is an httptest origin that counts its calls.
type upstream struct {
	*httptest.Server
	calls atomic.Int64
}

func newUpstream(t testing.TB, h http.HandlerFunc) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.calls.Add(1)
		h(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

// env is one sidecar (proxy handler on a real socket) with a real L1.
type env struct {
	t     testing.TB
	up    *upstream
	front *httptest.Server
	h     *proxy.Handler
	l1    *l1.Store
	reg   *prometheus.Registry
}

type envOpt func(*proxy.Options, *l1.Store)

func newEnv(t testing.TB, up *upstream, routes []testRoute, opts ...envOpt) *env {
	t.Helper()
	store, err := l1.New(l1.Options{MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	var u *url.URL
	if up.Server != nil {
		u, _ = url.Parse(up.URL)
	}
	reg := prometheus.NewRegistry()
	o := proxy.Options{
		Upstream: u,
		// Generous: a call that a test does not mean to time out must
		// not, however loaded the machine (2 s once failed a held bulk
		// call under -race: 502 for its ids). Tests of timeouts set
		// their own.
		Timeout:      30 * time.Second,
		MaxBodyBytes: 1 << 20,
		Routes:       compile(t, routes),
		Cache:        cache.NewTiered(store, nil, cache.TieredOptions{}),
		Metrics:      metrics.New(reg),
	}
	for _, f := range opts {
		f(&o, store)
	}
	h, err := proxy.New(o)
	if err != nil {
		t.Fatal(err)
	}
	front := edgeServer(t, h, o.Metrics)
	return &env{t: t, up: up, front: front, h: h, l1: store, reg: reg}
}

// edgeServer serves h as internal/server serves the proxy: on the edge's
// listener (its connections bound each write at server.write_timeout's
// default and are not *net.TCPConn, so net/http cannot hand a body to the
// socket past its buffer) and wired to it (edge.Wire), counting into count
// (nil: nothing). Without edge.Guard: the proxy's own tests see the
// requests the edge would let through, as they come.
// recordedFront serves e's handler behind the edge, each request with an
// access-log record, as the server wires it; *rec is the last request's.
func recordedFront(t testing.TB, e *env) (front *httptest.Server, rec **accesslog.Record) {
	rec = new(*accesslog.Record)
	front = edgeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, rc := accesslog.WithRecord(r.Context())
		*rec = rc
		e.h.ServeHTTP(w, r.WithContext(ctx))
	}), nil)
	return front, rec
}

func edgeServer(t testing.TB, h http.Handler, count edge.Counter) *httptest.Server {
	t.Helper()
	front := httptest.NewUnstartedServer(h)
	front.Listener = edge.Listener(front.Listener, 60*time.Second, count)
	edge.Wire(front.Config)
	front.Start()
	t.Cleanup(front.Close)
	return front
}

// get sends a request through the sidecar and returns status, header, body.
func (e *env) do(method, path string, hdr http.Header) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, e.front.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	// The test client must not negotiate compression on its own.
	req.Header.Set("Accept-Encoding", hdr.Get("Accept-Encoding"))
	if hdr.Get("Accept-Encoding") == "" {
		req.Header.Del("Accept-Encoding")
	}
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	e.l1.Wait()
	return resp, string(b)
}

func (e *env) get(path string) (*http.Response, string) { return e.do(http.MethodGet, path, nil) }

var client = &http.Client{
	Transport:     &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 512},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// refusedAddr is an address that refuses connections for the whole test: a
// TCP socket bound to it but never listening makes the kernel answer a SYN
// with RST, and holding the binding keeps any other process from taking
// the port, as one did once after a closed listener (the test then got
// that process's 404 instead of a refusal).
func refusedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}

// held blocks a test origin (or store) until release is ready. It also
// returns when the test has ended (t.Context is done before the cleanups
// run, and an origin's Close waits for its handlers) or after a minute: a
// test that fails before it releases what it held then fails, instead of
// hanging the suite to the package timeout.
func held[T any](t testing.TB, release <-chan T) {
	select {
	case <-release:
	case <-t.Context().Done():
	case <-time.After(time.Minute):
	}
}

// await waits, on the test's goroutine, for what ch signals (an origin
// reached, a goroutine started or done) and returns it; after a minute the
// test fails instead of hanging the suite.
func await[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatal("waited a minute for a signal that never came")
		panic("unreachable")
	}
}
