package proxy_test

import (
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestCachedCallDropsConnectionNamed: a field the client's Connection
// names is hop-by-hop (RFC 9110 §7.6.1): the upstream call of the cached
// path, a per-ID miss's and a bulk call's, never carries it, even on a
// route that forwards every header; the other fields still go.
func TestCachedCallDropsConnectionNamed(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		if r.URL.Path == "/users" {
			usersAnswer(func(string) bool { return true })(w, r, bulkIDs(r.URL.RawQuery))
			return
		}
		w.Header().Set("Cache-Control", "max-age=60")
		_, _ = w.Write([]byte("x"))
	})
	bulk := userRoute(10, time.Millisecond)
	bulk.ForwardAll = true
	e := newEnv(t, up, []testRoute{{Name: "a", Pattern: "/a/{id}", TTL: time.Minute, ForwardAll: true}, bulk})
	hdr := http.Header{"Connection": {"X-Hop, x-late-hop"}, "X-Hop": {"h"}, "X-Late-Hop": {"l"}, "X-Kept": {"k"}}
	for _, path := range []string{"/a/1", "/users/1"} {
		if resp, _ := e.do(http.MethodGet, path, hdr); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d", path, resp.StatusCode)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("%d upstream calls, want 2", len(got))
	}
	for i, h := range got {
		for _, k := range []string{"X-Hop", "X-Late-Hop", "Connection"} {
			if v, ok := h[k]; ok {
				t.Errorf("call %d carried %s: %q, named in the client's Connection", i, k, v)
			}
		}
		if h.Get("X-Kept") != "k" {
			t.Errorf("call %d: X-Kept %q, want it forwarded", i, h.Get("X-Kept"))
		}
	}
}
