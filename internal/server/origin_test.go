package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/redistest"
)

// An entry stored through L2 keeps what revalidation and Age need (the
// codec's version 2): replica B, which never fetched it, revalidates A's
// no-cache entry from Redis with If-None-Match, serves the stored body on
// the 304, and reports the upstream's Age it arrived with.
//
// B's one read of L2 must not reach l2.redis.timeout, past which it rightly
// reads a miss and fetches (fwd=miss, no If-None-Match: once in a run of
// the three packages under load 13 with 200 ms); the timeout here outlasts
// the test, which shows what the codec keeps, not how fast Redis answers.
func TestOriginRevalidatesAnotherReplicasEntry(t *testing.T) {
	rs := redistest.Start(t)
	var mu sync.Mutex
	var seen []string // the If-None-Match of each upstream GET
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("If-None-Match"))
		mu.Unlock()
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("Age", "30")
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		fmt.Fprint(w, "the-body")
	}))
	t.Cleanup(up.Close)
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstream: {url: %s, timeout: 2s}
cache:
  l1: {max_bytes: 16MiB}
%s
routes:
  - name: o
    path: /o/{id}
    freshness: origin
`, up.URL, strings.Replace(l2Block(false, rs.Addr()), "timeout: 200ms", "timeout: 30s", 1))
	a := startReplicaYAML(t, yaml)
	b := startReplicaYAML(t, yaml)

	code, h, got := a.do(t, http.MethodGet, "/o/1")
	if code != 200 || got != "the-body" || !strings.Contains(h.Get("Cache-Status"), "stored") || h.Get("Age") != "30" {
		t.Fatalf("A: %d %q Cache-Status %q Age %q", code, got, h.Get("Cache-Status"), h.Get("Age"))
	}
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	t.Cleanup(func() { rdb.Close() })
	eventually(t, 5*time.Second, "A's entry in L2", func() bool {
		keys, _ := rdb.Keys(context.Background(), "sidecache:e:*").Result()
		return len(keys) > 0
	})

	code, h, got = b.do(t, http.MethodGet, "/o/1")
	if code != 200 || got != "the-body" {
		t.Fatalf("B: %d %q", code, got)
	}
	if cs := h.Get("Cache-Status"); !strings.Contains(cs, "fwd=stale; fwd-status=304") {
		t.Errorf("B's Cache-Status %q, want a 304 revalidation; B's L2 lookup errors %v, coherence refusals %v", cs,
			metric(t, b, "sidecache_cache_lookups_total", `result="error"`, `tier="l2"`),
			metric(t, b, "sidecache_coherence_refused_total"))
	}
	if age := h.Get("Age"); age != "30" {
		t.Errorf("B's Age %q, want the upstream's 30", age)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"", `"v1"`}; strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Errorf("upstream saw If-None-Match %q, want %q", seen, want)
	}
}
