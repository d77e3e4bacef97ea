package proxy_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A copy served after an upstream failure that is still fresh is not
// stale: its Cache-Status says why the request went forward and keeps its
// ttl ≥ 0, never fwd=stale with a positive ttl (RFC 9211 §2.2: fwd=stale
// is a stale stored response; §2.4: ttl is the freshness left). A forced
// refresh (request_no_cache: refresh) holds the fresh copy it looked up
// for stale-if-error; when the refresh fails it is served. On a0a6804 it
// said "fwd=stale; fwd-status=502; ttl=58" (found by the invariant
// harness's cache-status check, on a collapsed read whose L2 read after
// the failure found a copy the other replica had just stored).
func TestHeldFreshCopyIsNotStale(t *testing.T) {
	var failing atomic.Bool
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		fmt.Fprint(w, "old")
	})
	rt := testRoute{Name: "r", Methods: []string{"GET"}, Pattern: "/x/{id}", TTL: time.Minute, StaleIfError: time.Hour, RequestNoCache: "refresh"}
	c := &clock{}
	e := newEnv(t, up, []testRoute{rt}, withClock(c))
	e.get("/x/1")
	c.advance(time.Second) // fresh still: 59 s left
	failing.Store(true)
	r, b := e.do("GET", "/x/1", http.Header{"Cache-Control": {"no-cache"}})
	cs := cacheStatus(r)
	if r.StatusCode != http.StatusOK || b != "old" {
		t.Fatalf("%d %q (%s), want the held copy", r.StatusCode, b, cs)
	}
	if strings.Contains(cs, "fwd=stale") || !strings.Contains(cs, "fwd=request") || !strings.Contains(cs, "ttl=5") {
		t.Errorf("Cache-Status %q, want fwd=request with the copy's ttl (58 or 59)", cs)
	}
	// A stale copy served is still fwd=stale with ttl < 0.
	c.advance(2 * time.Minute)
	r, b = e.do("GET", "/x/1", nil)
	if cs := cacheStatus(r); b != "old" || !strings.Contains(cs, "fwd=stale") || !strings.Contains(cs, "ttl=-") {
		t.Errorf("%q (%s), want the stale copy with a negative ttl", b, cs)
	}
}
