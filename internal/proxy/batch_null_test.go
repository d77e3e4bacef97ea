package proxy_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/route"
)

// dataLoaderAnswer answers a bulk call as a DataLoader batch function
// does (ids.map(id => rows.find(r => r.id === id) || null)): one value
// per id asked, in order, null for an id known() refuses. calls counts
// the bulk calls answered.
func dataLoaderAnswer(known func(string) bool, calls *atomic.Int64) func(http.ResponseWriter, *http.Request, []string) {
	return func(w http.ResponseWriter, r *http.Request, ids []string) {
		calls.Add(1)
		elems := make([]string, len(ids))
		for i, id := range ids {
			elems[i] = "null"
			if known(id) {
				elems[i] = userJSON(id, nil)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "["+strings.Join(elems, ",")+"]")
	}
}

// TestBulkAnswerNullElement: an upstream that answers a bulk call as a
// DataLoader or a GraphQL batch resolver does, null in the place of an id
// it does not know, answers that id as absent — the 404 it gives called
// directly, stored under negative_ttl, left out of a split list, as an id
// the answer omits is — and the other ids of the call their elements,
// in that one call. The null was a malformed answer: the call failed and
// was isolated id by id (more upstream calls), and the unknown id was
// answered 502.
func TestBulkAnswerNullElement(t *testing.T) {
	known := func(id string) bool { return id != "2" }
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}

	t.Run("batched reads then a list", func(t *testing.T) {
		var calls atomic.Int64
		o := newBulkOrigin(t, dataLoaderAnswer(known, &calls))
		user := userRoute(3, 10*time.Second) // full at 3 ids: leaves at once
		user.NegativeTTL = time.Minute
		e := newEnv(t, o.upstream, []testRoute{user, list})
		want := []int{http.StatusOK, http.StatusNotFound, http.StatusOK}
		for i, a := range fetchAll(e, []string{"/users/1", "/users/2", "/users/3"}, nil) {
			id := []string{"1", "2", "3"}[i]
			body := userJSON(id, nil)
			if want[i] == http.StatusNotFound {
				body = `{"error":"not found"}`
			}
			if a.err != nil || a.code != want[i] || a.body != body {
				t.Errorf("/users/%s: %d %q %v (%s), want %d %q", id, a.code, a.body, a.err, a.header.Get("Cache-Status"), want[i], body)
			}
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("%d upstream bulk calls for 3 concurrent reads, want 1 (%v)", n, o.snapshot())
		}
		// Each id as stored: 1 and 3 listed, 2 left out (its 404 kept
		// under negative_ttl), no call more.
		r, b := e.get("/users?ids=1,2,3")
		if want := "[" + userJSON("1", nil) + "," + userJSON("3", nil) + "]"; r.StatusCode != http.StatusOK || b != want {
			t.Errorf("list: %d %q (%s), want 200 %q", r.StatusCode, b, r.Header.Get("Cache-Status"), want)
		}
		r, b = e.get("/users/2")
		if r.StatusCode != http.StatusNotFound || !strings.HasPrefix(r.Header.Get("Cache-Status"), "sidecache; hit") {
			t.Errorf("/users/2 again: %d %q (%s), want the stored 404", r.StatusCode, b, r.Header.Get("Cache-Status"))
		}
		if n := calls.Load(); n != 1 || o.perID.Load() != 0 {
			t.Errorf("%d bulk calls, %d per-id calls in all, want 1 and 0", n, o.perID.Load())
		}
	})

	t.Run("a list, then the unknown id alone", func(t *testing.T) {
		var calls atomic.Int64
		o := newBulkOrigin(t, dataLoaderAnswer(known, &calls))
		e := newEnv(t, o.upstream, []testRoute{userRoute(3, 2*time.Millisecond), list})
		r, b := e.get("/users?ids=1,2,3")
		if want := "[" + userJSON("1", nil) + "," + userJSON("3", nil) + "]"; r.StatusCode != http.StatusOK || b != want {
			t.Errorf("list: %d %q (%s), want 200 %q", r.StatusCode, b, r.Header.Get("Cache-Status"), want)
		}
		// No negative_ttl: the 404 was not stored; the id's own call
		// is answered [null], an answer with no element.
		r, b = e.get("/users/2")
		if r.StatusCode != http.StatusNotFound || b != `{"error":"not found"}` {
			t.Errorf("/users/2: %d %q (%s), want 404", r.StatusCode, b, r.Header.Get("Cache-Status"))
		}
		got := o.snapshot()
		if len(got) > 0 {
			slices.Sort(got[0].ids) // a list's ids go in the order its batch took them
		}
		if n := calls.Load(); n != 2 || len(got) != 2 || !slices.Equal(got[0].ids, []string{"1", "2", "3"}) || !slices.Equal(got[1].ids, []string{"2"}) {
			t.Errorf("%d bulk calls %v, want 2: ids 1,2,3 then 2", n, got)
		}
	})
}
