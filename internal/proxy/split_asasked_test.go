package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/route"
)

// TestSplitListAsAsked: a split list is the upstream's own answer to that
// exact list. Two upstreams that differ where a list repeats an id: the
// bundled demo (an SQL IN (…): each row once, in id order) and one that
// answers once per id asked, in order (a loop over the ids); both read
// 01 and +2 as numbers, as a database does. Before, the sidecar listed a
// repeated id once whatever its upstream did (?ids=5,5 answered one
// element where the loop gives two), and fetched 01 as an id of its own,
// whose element the bulk answer names 1, so ?ids=01 answered [] where
// both give user 1. Now such a list passes through whole; a list of
// distinct canonical ids is still assembled per id, and equals both.
func TestSplitListAsAsked(t *testing.T) {
	loop := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/users" {
			http.Error(w, "per-id call", http.StatusTeapot)
			return
		}
		var elems []string
		for _, v := range strings.Split(r.URL.Query().Get("ids"), ",") {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 1 && n <= 100 {
				elems = append(elems, fmt.Sprintf(`{"id":%d,"name":"user-%d"}`, n, n))
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, "["+strings.Join(elems, ",")+"]")
	})
	demoE, _ := demoEnv(t, false)
	user := userRoute(100, time.Millisecond)
	user.Pattern = "/users/{id:[1-9][0-9]*}"
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
	loopE := newEnv(t, loop, []testRoute{user, list})

	cases := []struct {
		ids    string
		detail string // "" when answered per id
	}{
		{"5,5", "split-repeat"},
		{"3,1,3", "split-repeat"},
		{"5,%205", "split-repeat"},
		{"01,1", "split-spelling"},
		{"01", "split-spelling"},
		{"%2B2,3", "split-spelling"},
		{"+2,3", ""}, // a blank (+ in a query), dropped as the upstream drops it
		{"7", ""},
	}
	for _, o := range []struct {
		name string
		e    *env
	}{{"demo", demoE}, {"loop", loopE}} {
		for _, tc := range cases {
			t.Run(o.name+"/"+tc.ids, func(t *testing.T) {
				// The sidecar's answer twice, so that anything it stored
				// the first time answers the second.
				for range 2 {
					r, body := o.e.get("/users?ids=" + tc.ids)
					direct := fetch(context.Background(), o.e.up.URL+"/users?ids="+tc.ids, nil)
					if direct.err != nil || direct.code != http.StatusOK {
						t.Fatalf("upstream: %d %v", direct.code, direct.err)
					}
					if r.StatusCode != http.StatusOK || body != direct.body {
						t.Fatalf("sidecar %d %s (%s), the upstream's own answer %s", r.StatusCode, body, r.Header.Get("Cache-Status"), direct.body)
					}
					cs := r.Header.Get("Cache-Status")
					if tc.detail != "" && (!strings.Contains(cs, "fwd=bypass") || !strings.Contains(cs, "detail="+tc.detail)) {
						t.Errorf("Cache-Status %q, want a pass-through (detail=%s)", cs, tc.detail)
					}
					if tc.detail == "" && strings.Contains(cs, "bypass") {
						t.Errorf("Cache-Status %q: a list of distinct canonical ids passed through", cs)
					}
				}
			})
		}
	}
}
