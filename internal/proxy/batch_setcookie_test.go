package proxy_test

import (
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/route"
)

// TestBulkSetCookieReachesItsCaller: a bulk answer that sets a cookie is
// never shared (RFC 9111 §7.3): its elements answer the request whose
// headers the call carried (the opener) alone, and every other request of
// the batch fetches its own. The cookie is part of that answer: had each
// client called the upstream for its own id, it would have been sent the
// cookie minted for it, and NGINX or Varnish in front of the per-id URL
// relay a fetched answer's Set-Cookie to the client whose request fetched
// it while caching nothing. The elements dropped it for everyone, the
// opener and each member's own call included: a session or CSRF cookie
// minted by the app never reached any client of a batch route. Each
// client here comes from its own address, and the origin mints the cookie
// for the X-Forwarded-For it was sent: each must get its own, once, and
// nobody another's.
func TestBulkSetCookieReachesItsCaller(t *testing.T) {
	cases := []struct {
		name   string
		header http.Header // on every bulk answer, beside the cookie
	}{
		{"cookie alone", http.Header{"Cache-Control": {"max-age=60"}}},
		{"cookie and Vary X-Forwarded-For", http.Header{"Vary": {"X-Forwarded-For"}}},
		{"cookie and private", http.Header{"Cache-Control": {"private"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
				for k, v := range tc.header {
					w.Header()[k] = v
				}
				w.Header().Add("Set-Cookie", "sid="+r.Header.Get("X-Forwarded-For")+"; Path=/")
				usersAnswer(func(id string) bool { return id != "203" }, "X-Forwarded-For")(w, r, ids)
			})
			// The batch goes when it holds the 5 ids of the 4 clients
			// below (max_size) or at max_wait: each client must get its
			// own cookie whichever batches they made.
			list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
			e := newEnv(t, o.upstream, []testRoute{userRoute(5, 100*time.Millisecond), list})
			clients := []struct{ addr, path string }{
				{"127.0.0.2", "/users/201"},
				{"127.0.0.3", "/users/202"},
				{"127.0.0.4", "/users/203"}, // absent: a 404, made for this client as well
				{"127.0.0.5", "/users?ids=204,205"},
			}
			got := make([]answer, len(clients))
			var wg sync.WaitGroup
			for i, c := range clients {
				wg.Go(func() { got[i] = fetchFrom(c.addr, e.front.URL+c.path, "ua") })
			}
			wg.Wait()
			for i, c := range clients {
				a := got[i]
				if a.err != nil || (a.code != http.StatusOK && a.code != http.StatusNotFound) {
					t.Errorf("client %s %s: %d %v", c.addr, c.path, a.code, a.err)
					continue
				}
				want := []string{"sid=" + c.addr + "; Path=/"}
				if sc := a.header.Values("Set-Cookie"); !slices.Equal(sc, want) {
					t.Errorf("client %s %s: %d with Set-Cookie %q, want %q (the cookie its own call was sent) (%s)",
						c.addr, c.path, a.code, sc, want, a.header.Get("Cache-Status"))
				}
			}
			// Nothing was stored: the next reads fetch again, each its own cookie.
			a := fetchFrom("127.0.0.6", e.front.URL+"/users/201", "ua")
			if want := []string{"sid=127.0.0.6; Path=/"}; a.code != http.StatusOK || !slices.Equal(a.header.Values("Set-Cookie"), want) {
				t.Errorf("a later read of /users/201: %d with Set-Cookie %q, want 200 with %q (%s)", a.code, a.header.Values("Set-Cookie"), want, a.header.Get("Cache-Status"))
			}
		})
	}
	t.Run("list over several calls", func(t *testing.T) {
		o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
			w.Header().Add("Set-Cookie", "sid="+r.Header.Get("X-Forwarded-For")+"; Path=/")
			usersAnswer(func(string) bool { return true }, "X-Forwarded-For")(w, r, ids)
		})
		list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
		e := newEnv(t, o.upstream, []testRoute{userRoute(2, time.Minute), list})
		a := fetchFrom("127.0.0.7", e.front.URL+"/users?ids=301,302,303,304", "ua")
		if n := len(o.snapshot()); n != 2 {
			t.Errorf("%d bulk calls, want 2 (max_size 2)", n)
		}
		// Two calls set the same cookie: the list sets it once, as the
		// app's list endpoint would have.
		if want := []string{"sid=127.0.0.7; Path=/"}; a.code != http.StatusOK || !slices.Equal(a.header.Values("Set-Cookie"), want) {
			t.Errorf("list of 4 ids in 2 calls: %d with Set-Cookie %q, want 200 with %q (%s)", a.code, a.header.Values("Set-Cookie"), want, a.header.Get("Cache-Status"))
		}
	})
}
