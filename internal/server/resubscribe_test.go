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

// TestHitsReturnAfterRedisRestart: Redis is killed, the replicas notice
// (breaker open) and go on from L1 and the upstream; once Redis answers
// again every replica resubscribes (with backoff, no storm) and serves L1
// hits. The times are logged, not asserted (a shared machine): README's
// failure table quotes them.
func TestHitsReturnAfterRedisRestart(t *testing.T) {
	rs := redistest.Start(t)
	o := newOrigin(t)
	var rs3 []*replica
	for range 3 {
		rs3 = append(rs3, startReplica(t, o.URL, l2Block(false, rs.Addr())))
	}
	for _, r := range rs3 {
		r.get(t, "/clients/1")
	}
	rs.Kill()
	for i, r := range rs3 {
		eventually(t, 10*time.Second, fmt.Sprintf("replica %d sees Redis down", i), func() bool {
			return metric(t, r, "sidecache_l2_up") == 0
		})
	}
	peer := make([]float64, len(rs3))
	for i, r := range rs3 {
		peer[i] = metric(t, r, "sidecache_invalidations_total", `source="peer"`)
	}
	rs.Restart()
	answered := time.Now()
	hit := make([]time.Duration, len(rs3))
	resub := make([]time.Duration, len(rs3))
	eventually(t, 10*time.Second, "every replica serves a hit and resubscribed", func() bool {
		done := true
		for i, r := range rs3 {
			if hit[i] == 0 {
				if _, cs := r.get(t, "/clients/1"); strings.Contains(cs, "hit") {
					hit[i] = time.Since(answered)
				}
			}
			if resub[i] == 0 && metric(t, r, "sidecache_invalidations_total", `source="peer"`) > peer[i] {
				resub[i] = time.Since(answered)
			}
			done = done && hit[i] > 0 && resub[i] > 0
		}
		return done
	})
	for i := range rs3 {
		t.Logf("replica %d: first L1 hit %v, resubscribed %v after Redis answered", i, hit[i].Round(time.Millisecond), resub[i].Round(time.Millisecond))
	}
}
