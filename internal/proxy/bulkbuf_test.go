package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBulkBufferNotAliased: the buffer a route reads its bulk answers
// into is reused by its next bulk call (bulkmem.Route), so nothing
// that outlives a call may point into it: each stored element is a copy
// of its bytes (bulk.SplitForRoom). Each call here answers elements of
// one size filled with a byte of its own, and reads its answer over the
// last one's bytes; an element that aliased the buffer would be served,
// at its next hit, with a later call's fill.
func TestBulkBufferNotAliased(t *testing.T) {
	var mu sync.Mutex
	calls, served := 0, map[string]string{}
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		mu.Lock()
		calls++
		var parts []string
		for _, id := range ids {
			e := fmt.Sprintf(`{"id":%q,"fill":%q}`, id, strings.Repeat(string(rune('a'+calls%26)), 3000))
			served[id] = e
			parts = append(parts, e)
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "["+strings.Join(parts, ",")+"]")
	})
	// Four ids a call (a full batch leaves at once), so that most
	// elements have the answer's next bytes past them.
	e := newEnv(t, o.upstream, []testRoute{userRoute(4, time.Second)})
	const rounds, per = 20, 4
	for r := range rounds {
		var paths []string
		for i := range per {
			paths = append(paths, fmt.Sprintf("/users/u%02d-%d", r, i)) // one length: answers of one size
		}
		for i, a := range fetchAll(e, paths, nil) {
			if a.err != nil || a.code != http.StatusOK {
				t.Fatalf("GET %s: %d %v", paths[i], a.code, a.err)
			}
		}
	}
	mu.Lock()
	want := served
	if calls < rounds {
		t.Fatalf("%d bulk calls for %d rounds", calls, rounds)
	}
	mu.Unlock()
	for id, w := range want {
		r, body := e.get("/users/" + id)
		if cs := r.Header.Get("Cache-Status"); !strings.Contains(cs, "hit") {
			t.Fatalf("GET %s again: Cache-Status %q, want a hit", id, cs)
		}
		if body != w {
			t.Errorf("GET %s again: %.40q…, want %.40q… (overwritten by a later bulk answer)", id, body, w)
		}
	}
}
