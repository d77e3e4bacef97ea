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
	// A's L2 write is asynchronous, and a replica whose invalidation
	// channel is not yet proven refuses older entries: each attempt uses a
	// fresh id, and one L2 hit via Sentinel that costs no upstream call is
	// what this shows.
	for i := 100; ; i++ {
		path := fmt.Sprintf("/clients/%d", i)
		a.get(t, path)
		time.Sleep(50 * time.Millisecond)
		before := o.gets.Load()
		if _, cs := b.get(t, path); strings.Contains(cs, "detail=l2") {
			if n := o.gets.Load(); n != before {
				t.Fatalf("B's L2 hit made %d upstream calls", n-before)
			}
			break
		}
		if i == 150 {
			t.Fatal("B never hit L2 via Sentinel")
		}
	}
	a.get(t, "/clients/3")
	b.get(t, "/clients/3")
	a.do(t, http.MethodPatch, "/clients/3")
	eventually(t, 2*time.Second, "B sees the write", func() bool {
		got, _ := b.get(t, "/clients/3")
		return got == body("3", 1)
	})
}
