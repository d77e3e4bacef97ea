package proxy_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHeadRouteKeepsItsOwnEntries: a route of HEAD alone before a route
// of GET on the same path (first match wins: the HEADs are the first
// route's, the GETs the second's). An entry is served only by the route
// that stored it (its _route tag: a HEAD route's tags are not the GET
// route's, so a write that drops one may leave the other), so each route
// missed the other's entry, and under one key each fill overwrote the
// other's: a GET and a HEAD in turn went upstream every time. Each keeps
// its own entry now, and answers from it.
func TestHeadRouteKeepsItsOwnEntries(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", r.Method, r.URL.Path)
	})
	e := newEnv(t, up, []testRoute{
		{Name: "x-head", Methods: []string{"HEAD"}, Pattern: "/x/{id}", TTL: time.Minute, Tags: []string{"xh:{id}"}},
		{Name: "x", Methods: []string{"GET"}, Pattern: "/x/{id}", TTL: time.Minute, Tags: []string{"x:{id}"}},
	})
	for i, want := range []struct {
		method, status string
		calls          int64
	}{
		{"GET", "fwd=miss", 1}, {"HEAD", "fwd=miss", 2},
		{"GET", "hit", 2}, {"HEAD", "hit", 2}, {"GET", "hit", 2},
	} {
		r, b := e.do(want.method, "/x/1", nil)
		cs := r.Header.Get("Cache-Status")
		if r.StatusCode != http.StatusOK || !strings.Contains(cs, want.status) || up.calls.Load() != want.calls {
			t.Fatalf("request %d, %s: %d %q, Cache-Status %q, %d upstream calls; want 200, %s, %d calls",
				i, want.method, r.StatusCode, b, cs, up.calls.Load(), want.status, want.calls)
		}
		if want.method == "GET" && b != "GET /x/1" {
			t.Fatalf("GET answered %q", b)
		}
	}
}
