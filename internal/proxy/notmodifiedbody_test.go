package proxy_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// Prober H2: a 304 carrying Content-Encoding: gzip (or another
// Content-Type) replaced the stored identity body's own fields, so after
// the revalidation every client got the identity bytes labelled gzip, and
// a client that decodes got garbage. The fields the stored body depends on
// are not updated from a 304 (RFC 9111 §3.2); the others are.
func TestNotModifiedKeepsTheStoredBodysFields(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"e1"`)
		w.Header().Set("Content-Type", "text/plain")
		if r.Header.Get("If-None-Match") == `"e1"` {
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Type", "application/x-evil")
			w.Header().Set("X-Fresh", "from-304")
			w.WriteHeader(http.StatusNotModified)
			return
		}
		fmt.Fprint(w, "rv body")
	})
	c := &clock{}
	rt := testRoute{Name: "rv", Pattern: "/rv/{id}", TTL: time.Second}
	e := newEnv(t, up, []testRoute{rt}, withClock(c), withRedis(t))
	e.get("/rv/1")
	c.advance(2 * time.Second)
	for i, hdr := range []http.Header{nil, nil, {"Accept-Encoding": {"gzip"}}} {
		resp, body := e.do("GET", "/rv/1", hdr)
		if ce, ct := resp.Header.Values("Content-Encoding"), resp.Header.Get("Content-Type"); len(ce) > 0 || ct != "text/plain" || body != "rv body" {
			t.Errorf("request %d after the 304: Content-Encoding %q, Content-Type %q, body %q (%s)", i, ce, ct, body, cacheStatus(resp))
		}
		if i > 0 && resp.Header.Get("X-Fresh") != "from-304" {
			t.Errorf("request %d: X-Fresh %q: the 304's other fields must update the entry", i, resp.Header.Get("X-Fresh"))
		}
	}
	if n := up.calls.Load(); n != 2 {
		t.Errorf("upstream calls = %d, want 2 (the fill and one revalidation)", n)
	}
}
