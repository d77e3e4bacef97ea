package proxy_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/proxy"
)

// TestBatchNotFoundBodiesApart: the 404 entries of two ids a bulk answer
// left out (kept under negative_ttl, in L1 as the entries themselves)
// each own their body. They shared bulkanswer's one exported slice, so a
// write into one 404's body (or an append within its capacity) was every
// later 404's answer, for every id of every batch route.
func TestBatchNotFoundBodiesApart(t *testing.T) {
	const want = `{"error":"not found"}`
	o := newBulkOrigin(t, usersAnswer(func(id string) bool { return id != "3" && id != "6" && id != "9" }))
	rt := userRoute(10, 20*time.Millisecond)
	rt.NegativeTTL = time.Minute
	e := newEnv(t, o.upstream, []testRoute{rt})
	for _, a := range fetchAll(e, []string{"/users/3", "/users/6"}, nil) {
		if a.err != nil || a.code != http.StatusNotFound || a.body != want {
			t.Fatalf("missing id: %d %q %v, want 404 %q", a.code, a.body, a.err, want)
		}
	}
	e.l1.Wait()
	ctx := context.Background()
	keys, _ := e.l1.KeysWithTag(proxy.RouteTag("user"), 10)
	var bodies [][]byte
	for _, k := range keys {
		if en, ok, _ := e.l1.Get(ctx, k); ok && en.Status == http.StatusNotFound {
			bodies = append(bodies, en.Body)
		}
	}
	if len(bodies) != 2 {
		t.Fatalf("%d stored 404 entries of %d keys, want 2", len(bodies), len(keys))
	}
	if &bodies[0][0] == &bodies[1][0] {
		t.Error("the two ids' 404 entries share one body array")
	}
	bodies[0][2] = 'X' // one entry's body written in place
	if string(bodies[1]) != want {
		t.Errorf("the other id's 404 body after one was written: %q, want %q", bodies[1], want)
	}
	r, b := e.get("/users/9") // a later 404, from a bulk call of its own
	if r.StatusCode != http.StatusNotFound || b != want {
		t.Errorf("a later 404 after one entry's body was written: %d %q, want 404 %q", r.StatusCode, b, want)
	}
}
