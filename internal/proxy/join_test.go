package proxy_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
)

// doCounted serves one request straight through e.h, its context counting
// the calls of Done in joined (joinCtx): the first is the request's wait on
// the flight it joined, so a test waits for joined >= 1 instead of sleeping
// "long enough" for the request to reach the flight.
func (e *env) doCounted(method, path string, hdr http.Header, joined *atomic.Int64) (*http.Response, string) {
	req := httptest.NewRequest(method, path, nil).WithContext(joinCtx{context.Background(), joined})
	// The front's host, not httptest's example.com: the host is part of
	// the cache key, so a request keyed on another host would lead a
	// flight of its own instead of joining the one a request sent to the
	// front (e.do) leads, and joined would count its own wait.
	req.Host = strings.TrimPrefix(e.front.URL, "http://")
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, req)
	resp := w.Result()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// withWaiting wraps the front server's handler so that waiting counts the
// requests that have begun to wait on a flight: each request counts once,
// at the first Done on its context (see doCounted).
func withWaiting(e *env, waiting *atomic.Int64) {
	e.front = edgeServer(e.t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.h.ServeHTTP(w, r.WithContext(onceCtx{Context: r.Context(), n: waiting, seen: new(atomic.Bool)}))
	}), nil)
}

// onceCtx adds one to n at the first call of Done on it.
type onceCtx struct {
	context.Context
	n    *atomic.Int64
	seen *atomic.Bool
}

func (c onceCtx) Done() <-chan struct{} {
	if !c.seen.Swap(true) {
		c.n.Add(1)
	}
	return c.Context.Done()
}
