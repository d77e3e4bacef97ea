package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// TestResubscribeKeepsL1: a subscription lost and rebuilt (here Redis drops
// the replica's pub/sub connection) no longer empties L1: an entry fetched
// less than max_lag ago is still an L1 hit. Emptying every L1 on each
// resubscribe is what turned a subscription flapping under load into a
// fleet-wide refetch.
func TestResubscribeKeepsL1(t *testing.T) {
	rs := redistest.Start(t)
	o := newOrigin(t)
	// A max_lag longer than the test: the entry stays younger than it.
	b := startReplicaYAML(t, fmt.Sprintf(baseConfig, o.URL, l2Block(false, rs.Addr()))+"coherence:\n  max_lag: 1h\n")

	b.get(t, "/clients/1")
	eventually(t, 5*time.Second, "L1 hit", func() bool {
		_, cs := b.get(t, "/clients/1")
		return strings.Contains(cs, "hit")
	})
	peer := metric(t, b, "sidecache_invalidations_total", `source="peer"`)
	if err := rawClient(t, rs.Addr()).Do(context.Background(), "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	// The gap is counted as a peer invalidation once resubscribed.
	eventually(t, 10*time.Second, "resubscribed", func() bool {
		return metric(t, b, "sidecache_invalidations_total", `source="peer"`) > peer
	})
	l1hits := metric(t, b, "sidecache_cache_lookups_total", `tier="l1"`, `result="hit"`)
	gets := o.gets.Load()
	b.get(t, "/clients/1")
	if got := metric(t, b, "sidecache_cache_lookups_total", `tier="l1"`, `result="hit"`); got != l1hits+1 {
		t.Fatalf("L1 hits went from %v to %v: the entry was dropped on resubscribe", l1hits, got)
	}
	if o.gets.Load() != gets {
		t.Fatal("the read after the resubscribe reached the upstream")
	}
}
