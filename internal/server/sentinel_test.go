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
	eventually(t, 3*time.Second, "B hit from l2 via Sentinel", func() bool {
		_, cs := b.get(t, "/clients/3")
		return strings.Contains(cs, "detail=l2")
	})
	if n := o.gets.Load(); n != 1 {
		t.Fatalf("upstream GETs = %d, want 1", n)
	}
	a.do(t, http.MethodPatch, "/clients/3")
	eventually(t, 2*time.Second, "B sees the write", func() bool {
		got, _ := b.get(t, "/clients/3")
		return got == body("3", 1)
	})
}
