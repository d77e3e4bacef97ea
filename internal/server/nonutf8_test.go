package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// Issue 20 item 6: PUT /items/caf%E9 through A invalidates the item on B,
// whose tags (item:caf\xe9 and its URI tag) are not UTF-8. On 16d946c the
// JSON pub/sub message turned \xe9 into U+FFFD and B served the old
// version until its TTL ran out.
func TestNonUTF8TagReachesPeer(t *testing.T) {
	var mu sync.Mutex
	ver := map[string]int{}
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method == http.MethodPut {
			ver[r.URL.Path]++
		}
		fmt.Fprintf(w, "%x-v%d", r.URL.Path, ver[r.URL.Path])
	}))
	t.Cleanup(o.Close)
	rs := redistest.Start(t)
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, token: secret}
upstream: {url: %s, timeout: 2s}
cache:
  l1: {max_bytes: 16MiB}
  l2: {redis: {addrs: [%s], timeout: 200ms}}
routes:
  - {name: item, path: "/items/{name}", ttl: 5m, tags: ["item:{name}"]}
  - {name: item-write, methods: [PUT], path: "/items/{name}", invalidate: ["item:{name}"]}
`, o.URL, rs.Addr())
	a, b := startReplicaYAML(t, yaml), startReplicaYAML(t, yaml)
	const path = "/items/caf%E9"
	cachedOnBoth(t, a, b, path)
	if code, _, _ := a.do(t, http.MethodPut, path); code != 200 {
		t.Fatalf("PUT: %d", code)
	}
	want := fmt.Sprintf("%x-v1", "/items/caf\xe9")
	if got, _ := a.get(t, path); got != want {
		t.Fatalf("A read its own write as %q, want %q", got, want)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		got, cs := b.get(t, path)
		if got == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B still serves %q (%s) 2s after the write, want %q", got, cs, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
