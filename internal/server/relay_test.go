package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// TestRelayTier wires cache.l2.redis.subscribe_addrs end to end: replica A
// subscribes on a read replica of the master, replica B on the master. A
// proves its channel there (its beats are published on the master and come
// back through the read replica), and B's write reaches A's L1 the same
// way.
func TestRelayTier(t *testing.T) {
	m := redistest.Start(t, redistest.NoSyncDelay()...)
	rr := redistest.StartReplica(t, m.Addr())
	o := newOrigin(t)
	coherence := "coherence: {max_lag: 300ms}\n"
	a := startReplicaYAML(t, fmt.Sprintf(baseConfig, o.URL,
		l2Block(false, m.Addr())+"      subscribe_addrs: ["+rr.Addr()+"]\n")+coherence)
	b := startReplicaYAML(t, fmt.Sprintf(baseConfig, o.URL, l2Block(false, m.Addr()))+coherence)

	numsub := func(addr string) string {
		t.Helper()
		c := rawClient(t, addr)
		n, err := c.PubSubNumSub(context.Background(), "sidecache:invalidate").Result()
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(n["sidecache:invalidate"])
	}
	// Each replica subscribes on its own goroutine once started: counted
	// until both are there, not at once (on a loaded machine the count
	// read 0,1 right after the start).
	eventually(t, 10*time.Second, "A subscribed on the read replica, B on the master", func() bool {
		return numsub(rr.Addr())+","+numsub(m.Addr()) == "1,1"
	})
	eventually(t, 10*time.Second, "A's coherence proven through the read replica", func() bool {
		code, _, body := a.do(t, http.MethodGet, "admin:/readyz")
		var v map[string]any
		return code == http.StatusOK && json.Unmarshal([]byte(body), &v) == nil && v["coherence"] == "proven"
	})

	id := "7"
	a.get(t, "/clients/"+id)
	eventually(t, 2*time.Second, "A cached", func() bool {
		got, cs := a.get(t, "/clients/"+id)
		return got == body(id, 0) && strings.Contains(cs, "detail=l1")
	})
	if code, _, _ := b.do(t, http.MethodPatch, "/clients/"+id); code != 200 {
		t.Fatalf("PATCH through B: %d", code)
	}
	eventually(t, 5*time.Second, "A sees B's write", func() bool {
		got, _ := a.get(t, "/clients/"+id)
		return got == body(id, 1)
	})
}
