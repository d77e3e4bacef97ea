package proxy_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
)

// doCounted serves one request straight through e.h, its context counting
// the calls of Done in joined (joinCtx): the first is the request's wait on
// the flight it joined, so a test waits for joined >= 1 instead of sleeping
// "long enough" for the request to reach the flight.
func (e *env) doCounted(method, path string, hdr http.Header, joined *atomic.Int64) (*http.Response, string) {
	req := httptest.NewRequest(method, path, nil).WithContext(joinCtx{context.Background(), joined})
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, req)
	resp := w.Result()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}
