package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/route"
)

// TestBatchVaryWithheldOpenerGetsItsVariant: a bulk answer that varies on
// a header the route withheld (not yet learned from a Vary) was made
// without the header its opener sent: another variant than the opener's
// (RFC 9111 §4.1). The per-key path learns the header and asks once more
// (TestVaryOnWithheldHeaderIsLearned); the batch path learned it too, but
// handed the opener the answer made without it (the invariant harness's
// bulk-vary-withheld row: a tenant's list got tenant "" elements). Now the
// opener fetches its own with the header, within its budget of two calls,
// as a one-id request and as a list.
func TestBatchVaryWithheldOpenerGetsItsVariant(t *testing.T) {
	cases := []struct {
		name, header, value, path string
		ids                       []string
	}{
		{"one id, X-Tenant", "X-Tenant", "acme", "/users/1", []string{"1"}},
		{"list, X-Tenant", "X-Tenant", "globex", "/users?ids=2,3", []string{"2", "3"}},
		{"one id, User-Agent", "User-Agent", "iPhone", "/users/4", []string{"4"}},
		{"list, User-Agent", "User-Agent", "Desktop", "/users?ids=5,6", []string{"5", "6"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
				w.Header().Set("Vary", tc.header)
				usersAnswer(func(string) bool { return true }, tc.header)(w, r, ids)
			})
			rt := userRoute(len(tc.ids), time.Minute) // the request fills its batch alone
			list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
			e := newEnv(t, o.upstream, []testRoute{rt, list})
			a := fetch(context.Background(), e.front.URL+tc.path, http.Header{tc.header: {tc.value}})
			if a.err != nil || a.code != http.StatusOK {
				t.Fatalf("%s: %d %v %q", tc.path, a.code, a.err, a.body)
			}
			var elems []map[string]any
			body := a.body
			if !strings.HasPrefix(body, "[") {
				body = "[" + body + "]"
			}
			if err := json.Unmarshal([]byte(body), &elems); err != nil || len(elems) != len(tc.ids) {
				t.Fatalf("%s: %q: %v", tc.path, a.body, err)
			}
			for _, el := range elems {
				if got, _ := el[strings.ToLower(tc.header)].(string); got != tc.value {
					t.Errorf("%s with %s %q: element %v made for %s %q, want the request's own variant",
						tc.path, tc.header, tc.value, el["id"], tc.header, got)
				}
			}
			// The shared call (made without the header), then the
			// request's own (with it): two, its budget.
			if n := len(o.snapshot()); n != 2 {
				t.Errorf("%d bulk calls, want 2 (the withheld one, then the request's own)", n)
			}
		})
	}
}

// TestBatchVaryWithheldMemberGetsItsVariant: a bulk call opened by a
// request without a header the route withholds (X-Tenant) answers with
// Vary: X-Tenant: its elements are the variant of the header's absence.
// A member of the same call that sent the header must not get that
// variant (RFC 9111 §4.1), whichever request opened the call, shared
// (stored) or private.
func TestBatchVaryWithheldMemberGetsItsVariant(t *testing.T) {
	for _, private := range []bool{false, true} {
		for round := range 4 {
			t.Run(fmt.Sprintf("private=%v/%d", private, round), func(t *testing.T) {
				o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
					w.Header().Set("Vary", "X-Tenant")
					if private {
						w.Header().Set("Cache-Control", "private, max-age=60")
					}
					usersAnswer(func(string) bool { return true }, "X-Tenant")(w, r, ids)
				})
				rt := userRoute(3, time.Minute) // the three requests below fill one batch
				list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
				e := newEnv(t, o.upstream, []testRoute{rt, list})
				reqs := []struct{ path, tenant string }{
					{"/users/1", ""}, {"/users/2", "acme"}, {"/users?ids=3", "globex"},
				}
				got := make([]answer, len(reqs))
				var wg sync.WaitGroup
				for i, q := range reqs {
					h := http.Header{}
					if q.tenant != "" {
						h.Set("X-Tenant", q.tenant)
					}
					wg.Go(func() { got[i] = fetch(context.Background(), e.front.URL+q.path, h) })
				}
				wg.Wait()
				for i, q := range reqs {
					a := got[i]
					if a.err != nil || a.code != http.StatusOK {
						t.Errorf("%s: %d %v %q", q.path, a.code, a.err, a.body)
						continue
					}
					body := a.body
					if !strings.HasPrefix(body, "[") {
						body = "[" + body + "]"
					}
					var elems []map[string]any
					if err := json.Unmarshal([]byte(body), &elems); err != nil || len(elems) != 1 {
						t.Fatalf("%s: %q: %v", q.path, a.body, err)
					}
					if tn, _ := elems[0]["x-tenant"].(string); tn != q.tenant {
						t.Errorf("%s with X-Tenant %q: element made for X-Tenant %q (%s)", q.path, q.tenant, tn, a.header.Get("Cache-Status"))
					}
				}
			})
		}
	}
}
