package proxy_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestBatchElementStrings: the elements of one bulk answer are stored
// under their ids' keys with their own tags, whether those strings fit the
// room the split left past each element (built for the longest id) or an
// id's escaped key outgrows it ("éé": 4 bytes, 12 in the key) and they
// take an allocation of their own: each id is then an L1 hit with its own
// body, and a write invalidates its id's tag alone.
func TestBatchElementStrings(t *testing.T) {
	ids := []string{"abcdef", "éé", "7", "a b"}
	// The writes' answer: 204.
	o := newBulkOrigin(t, nil, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	rt := userRoute(len(ids), time.Second) // one call: it leaves full
	rt.Tags = []string{"user:{id}"}
	write := testRoute{Name: "user-write", Methods: []string{"PATCH"}, Pattern: "/users/{id}", Invalidate: []string{"user:{id}"}}
	e := newEnv(t, o.upstream, []testRoute{rt, write}, withL1Invalidator)
	paths := make([]string, len(ids))
	for i, id := range ids {
		paths[i] = "/users/" + url.PathEscape(id)
	}
	for i, a := range fetchAll(e, paths, nil) {
		if a.err != nil || a.code != 200 || a.body != userJSON(ids[i], nil) {
			t.Fatalf("id %q: %d %q %v, want 200 %q", ids[i], a.code, a.body, a.err, userJSON(ids[i], nil))
		}
	}
	if calls := o.snapshot(); len(calls) != 1 {
		t.Fatalf("%d bulk calls, want 1", len(calls))
	}
	hits := func(when string, miss string) {
		t.Helper()
		for i, p := range paths {
			r, b := e.get(p)
			cs := r.Header.Get("Cache-Status")
			if hit := strings.HasPrefix(cs, "sidecache; hit"); hit == (ids[i] == miss) || b != userJSON(ids[i], nil) {
				t.Errorf("%s: id %q: %q %q", when, ids[i], cs, b)
			}
		}
	}
	hits("after the bulk call", "")
	for _, id := range []string{"éé", "abcdef"} {
		req, _ := http.NewRequest(http.MethodPatch, e.front.URL+"/users/"+url.PathEscape(id), strings.NewReader("x"))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		hits("after a write to "+id, id)
	}
}
