package proxy_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/route"
)

// Prober H11: a split list's answer said only Vary: Accept-Encoding,
// though its elements vary on Accept-Language (the bulk answer's Vary)
// and were chosen by the target route's keyed headers: a shared cache in
// front kept one language's list for every language. The list's Vary is
// the union of its elements' Vary and the keyed headers, with
// Accept-Encoding (RFC 9110 §12.5.5), whether the elements were fetched
// (a miss) or stored (a hit).
func TestSplitListVariesAsItsElements(t *testing.T) {
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		w.Header().Set("Vary", "Accept-Language")
		usersAnswer(func(string) bool { return true }, "Accept-Language")(w, r, ids)
	})
	user := userRoute(100, 10*time.Millisecond)
	user.Key = cachekey.Options{AllQuery: true, Headers: []string{"x-tenant"}}
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
	e := newEnv(t, o.upstream, []testRoute{user, list}, withRedis(t))
	for _, lang := range []string{"fr", "fr", "de"} {
		resp, body := e.do("GET", "/users?ids=1,2", http.Header{"Accept-Language": {lang}, "X-Tenant": {"t1"}})
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"accept-language":"`+lang+`"`) {
			t.Fatalf("%s: %d %s", lang, resp.StatusCode, body)
		}
		if v := resp.Header.Values("Vary"); len(v) != 1 || v[0] != "Accept-Encoding, Accept-Language, X-Tenant" {
			t.Errorf("%s: Vary %q, want the elements' and the key's headers with Accept-Encoding (%s)", lang, v, cacheStatus(resp))
		}
	}
}
