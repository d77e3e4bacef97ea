package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
	"github.com/sidecache/sidecache/internal/route"
)

// targetedNoStores are answers that say no-store to a cache in a targeted
// field (RFC 9213's CDN-Cache-Control, the Edge Architecture's
// Surrogate-Control), each spelling the Cache-Control parser accepts, and
// beside a Cache-Control or a targeted field that would store them.
var targetedNoStores = []http.Header{
	{"Surrogate-Control": {"no-store"}},
	{"Cdn-Cache-Control": {"no-store"}},
	{"Surrogate-Control": {"max-age=60;no-store"}},
	{"Cdn-Cache-Control": {"max-age=60 no-store"}},
	{"Surrogate-Control": {"no-store;edge1"}, "Cache-Control": {"public, max-age=60"}},
	{"Cdn-Cache-Control": {"max-age=60"}, "Surrogate-Control": {"no-store"}},
}

// An answer whose Surrogate-Control or CDN-Cache-Control names no-store
// is never stored nor handed to another caller, in either freshness mode
// (origin mode with the default targeted_fields, and with none: the
// field is then not obeyed for its lifetimes, yet its no-store holds),
// from L1 or L2: strict for storage, as Varnish's built-in VCL refuses
// Surrogate-Control: no-store. Before, route mode ignored the fields and
// stored the first caller's answer for the next ones, and origin mode did
// when the field was not the one its targets selected.
func TestTargetedNoStoreIsNotStored(t *testing.T) {
	srv := redistest.Start(t)
	modes := []struct {
		name   string
		origin *route.Origin
	}{
		{"route", nil},
		{"origin", &route.Origin{}},
		{"origin-no-targets", &route.Origin{Targets: []string{}}},
	}
	for i, h := range targetedNoStores {
		for j, m := range modes {
			t.Run(fmt.Sprintf("%v/%s", h, m.name), func(t *testing.T) {
				neverShared(t, srv, fmt.Sprintf("tns%d-%d:", i, j), h, m.origin)
			})
		}
	}
}

// The same on a batch route: a bulk answer with a targeted no-store
// stores none of its elements, and a split list made of them is each
// caller's own.
func TestTargetedNoStoreBatchAndSplit(t *testing.T) {
	const key = "X-Api-Key" // personalises the answer; forwarded (forward_headers: all)
	for _, h := range targetedNoStores {
		t.Run(fmt.Sprint(h), func(t *testing.T) {
			all := func(string) bool { return true }
			o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
				for k, v := range h {
					w.Header()[k] = v
				}
				usersAnswer(all, key)(w, r, ids)
			}, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range h {
					w.Header()[k] = v
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, userJSON(idOf(r.URL.Path), r.Header, key))
			})
			list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
			user := userRoute(100, time.Millisecond)
			user.ForwardAll = true
			e := newEnv(t, o.upstream, []testRoute{user, list})
			for _, who := range []string{"alice", "bob", "alice"} {
				r, body := e.do(http.MethodGet, "/users/1", http.Header{key: {who}})
				if want := userJSON("1", http.Header{key: {who}}, key); r.StatusCode != 200 || body != want {
					t.Fatalf("%s: %d %q (%s), want %q", who, r.StatusCode, body, r.Header.Get("Cache-Status"), want)
				}
				e.l1.Wait()
			}
			for _, who := range []string{"carol", "dave"} {
				r, body := e.do(http.MethodGet, "/users?ids=1,2", http.Header{key: {who}})
				want := "[" + userJSON("1", http.Header{key: {who}}, key) + "," + userJSON("2", http.Header{key: {who}}, key) + "]"
				if r.StatusCode != 200 || body != want {
					t.Fatalf("split for %s: %d %q (%s), want %q", who, r.StatusCode, body, r.Header.Get("Cache-Status"), want)
				}
				e.l1.Wait()
			}
			if n := e.l1.Items(); n != 0 {
				t.Errorf("l1 holds %d entries of answers that said no-store", n)
			}
		})
	}
}
