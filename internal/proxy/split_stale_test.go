package proxy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/route"
)

// TestSplitStale: a list's stale ids are served as the batch route serves
// them one at a time: within stale_while_revalidate at once, with a
// background refresh; within stale_if_error when their fetch fails. The
// list read only fresh entries, so a failing upstream answered the list
// 502 while GET /users/1 got its stale copy (probe h2, D7).
func TestSplitStale(t *testing.T) {
	for _, tc := range []struct {
		name     string
		swr, sie time.Duration
		failing  bool
	}{
		{"stale-if-error", 0, time.Hour, true},
		{"stale-while-revalidate", time.Hour, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, failing := failingUsersOrigin(t)
			c := &clock{}
			rt := userRoute(10, time.Millisecond)
			rt.TTL, rt.StaleWhileRevalidate, rt.StaleIfError = time.Second, tc.swr, tc.sie
			list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
			e := newEnv(t, o.upstream, []testRoute{rt, list}, withClock(c))
			ctx := context.Background()
			if a := fetch(ctx, e.front.URL+"/users?ids=1,2", nil); a.err != nil || a.code != 200 {
				t.Fatalf("priming: %d %v", a.code, a.err)
			}
			c.advance(2 * time.Second) // stale
			failing.Store(tc.failing)
			before := len(o.snapshot())
			a := fetch(ctx, e.front.URL+"/users?ids=1,2", nil)
			want := "[" + userJSON("1", nil) + "," + userJSON("2", nil) + "]"
			if a.err != nil || a.code != 200 || a.body != want {
				t.Fatalf("stale list: %d %q %v (%s), want the stale copies", a.code, a.body, a.err, a.header.Get("Cache-Status"))
			}
			if !strings.Contains(a.header.Get("Cache-Status"), "stale=2") {
				t.Errorf("Cache-Status %q, want stale=2", a.header.Get("Cache-Status"))
			}
			if tc.failing {
				if n := len(o.snapshot()) - before; n != 1 {
					t.Errorf("%d bulk calls, want the one that failed", n)
				}
				return
			}
			// The background refresh: one bulk call, then fresh entries.
			for i := 0; len(o.snapshot()) == before; i++ {
				if i == 500 {
					t.Fatal("no background refresh of the stale ids")
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
