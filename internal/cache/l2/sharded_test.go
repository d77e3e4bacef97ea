package l2

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/redistest"
)

// TestShardedPubSubOnCluster: with ShardedPubSub, both channels of every
// replica live on the one master that owns their slot, as shard channels
// (none classic anywhere), so one node orders every invalidation before
// the beats that prove it; invalidations flow and each replica's own beats
// prove its channel.
func TestShardedPubSubOnCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	sharded := func(o *Options) { o.ShardedPubSub, o.MaxLag = true, 200*time.Millisecond }
	a := newReplica(t, cl.Addrs(), sharded)
	b := newReplica(t, cl.Addrs(), sharded)
	waitProven(t, a)
	waitProven(t, b)
	ctx := context.Background()
	if err := a.InvalidateTags(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if inv := b.nextInvalidation(t, 5*time.Second); !slices.Equal(inv.Tags, []string{"t"}) {
		t.Fatalf("peer got %+v, want t", inv)
	}

	var holders []string
	for _, n := range cl.Nodes() {
		rc := raw(t, n.Addr())
		shard, err := rc.PubSubShardChannels(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		classic, err := rc.PubSubChannels(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(classic) > 0 {
			t.Errorf("node %s has classic channels %v", n.Addr(), classic)
		}
		if len(shard) > 0 {
			holders = append(holders, n.Addr())
			for _, ch := range shard {
				if !strings.HasPrefix(ch, "{test:coherence}") {
					t.Errorf("shard channel %q outside the hash tag", ch)
				}
			}
			if want := 3; len(shard) != want { // invalidate + two beat channels
				t.Errorf("node %s holds shard channels %v, want the invalidation channel and both beat channels", n.Addr(), shard)
			}
		}
	}
	if len(holders) != 1 {
		t.Fatalf("shard channels on %v, want one node", holders)
	}
	if _, ok := a.rdb.(*redis.ClusterClient); !ok {
		t.Fatalf("got a %T, want a cluster client", a.rdb)
	}
}
