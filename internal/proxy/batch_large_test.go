package proxy_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/route"
)

// TestBatchElementOverMaxBody: a record larger than max_body_bytes on a
// batch route streams through, uncached, as on any cached route, whether
// or not another id shares its bulk call: alone, its one-id bulk answer
// was over the call's bound and answered 502, on every request (probe h2,
// D4). Its next requests pass for a while (hit-for-pass).
// A list holding it passes through to the upstream's list; its
// neighbours get their elements.
func TestBatchElementOverMaxBody(t *testing.T) {
	const maxBody = 4 << 10
	big := strings.Repeat("x", 3*maxBody)
	element := func(id string) map[string]string {
		if id == "7" {
			return map[string]string{"id": id, "blob": big}
		}
		return map[string]string{"id": id, "name": "user-" + id}
	}
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		var out []map[string]string
		for _, id := range ids {
			out = append(out, element(id))
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(element(strings.TrimPrefix(r.URL.Path, "/users/")))
	})
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
	e := newEnv(t, o.upstream, []testRoute{userRoute(10, time.Millisecond), list}, func(po *proxyOptions, _ *l1.Store) {
		po.MaxBodyBytes = maxBody
	})
	// Then hit-for-pass, as a cached route's answer over the bound: no
	// bulk call, which it would make too large for every id sharing it.
	for i, want := range []string{"detail=too-large", "detail=hit-for-pass"} {
		o.reset()
		r, b := e.get("/users/7")
		if r.StatusCode != 200 || !strings.Contains(b, big) {
			t.Fatalf("GET /users/7 alone, #%d: %d %.80q (%s), want the whole record", i, r.StatusCode, b, r.Header.Get("Cache-Status"))
		}
		if cs := r.Header.Get("Cache-Status"); !strings.Contains(cs, want) {
			t.Errorf("GET /users/7 alone, #%d: Cache-Status %q, want %s", i, cs, want)
		}
		if n := len(o.snapshot()); n != 1-i {
			t.Errorf("GET /users/7 alone, #%d: %d bulk calls, want %d", i, n, 1-i)
		}
	}
	r, b := e.get("/users?ids=6,7,8")
	if r.StatusCode != 200 || !strings.Contains(b, big) || !strings.Contains(b, `"user-6"`) {
		t.Fatalf("list holding 7: %d %.80q (%s), want the upstream's whole list", r.StatusCode, b, r.Header.Get("Cache-Status"))
	}
	for _, id := range []string{"6", "8"} {
		if r, _ := e.get("/users/" + id); r.StatusCode != 200 {
			t.Errorf("/users/%s: %d", id, r.StatusCode)
		}
	}
}
