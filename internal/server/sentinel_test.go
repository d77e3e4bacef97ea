package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// Two sidecars configured for Sentinel (master_name) share L2 through the
// master it names, and a write through one reaches the other.
func TestSentinelReplicas(t *testing.T) {
	sn := redistest.StartSentinel(t, "cache")
	o := newOrigin(t)
	l2 := fmt.Sprintf(`  l2:
    redis:
      addrs: [%s]
      master_name: cache
      timeout: 200ms
`, strings.Join(sn.SentinelAddrs(), ", "))
	a := startReplica(t, o.URL, l2)
	b := startReplica(t, o.URL, l2)
	a.get(t, "/clients/3")
	// A's L2 write is asynchronous: wait for it through a replica that has
	// not read the key (a miss there would fill its own L1 and hide L2).
	eventually(t, 3*time.Second, "the entry reaches L2", func() bool {
		_, cs := startReplica(t, o.URL, l2).get(t, "/clients/3")
		return strings.Contains(cs, "detail=l2")
	})
	before := o.gets.Load()
	if _, cs := b.get(t, "/clients/3"); !strings.Contains(cs, "detail=l2") {
		t.Fatalf("B: %q, want an L2 hit via Sentinel", cs)
	}
	if n := o.gets.Load(); n != before {
		t.Fatalf("B's L2 hit made %d upstream calls", n-before)
	}
	a.do(t, http.MethodPatch, "/clients/3")
	eventually(t, 2*time.Second, "B sees the write", func() bool {
		got, _ := b.get(t, "/clients/3")
		return got == body("3", 1)
	})
}
