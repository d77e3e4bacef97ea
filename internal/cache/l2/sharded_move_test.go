package l2

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/redistest"
)

// TestShardedPubSubSurvivesSlotMove moves the slot of the coherence hash
// tag from its owner to another master while two sharded replicas listen,
// as a resharding does: CLUSTER SETSLOT IMPORTING/MIGRATING, MIGRATE of
// the slot's keys, then SETSLOT NODE on every master (Redis 7.0 drops the
// shard subscriptions of a slot a node stops serving, with sunsubscribe).
// Each replica must then subscribe again, on the new owner (and nowhere
// else); set the floor past the move's start, so an entry fetched before
// the move and older than max_lag is refused even on a fresh proof; prove
// its channel again; and hear a peer's invalidation published after the
// move, after the gap it reported.
func TestShardedPubSubSurvivesSlotMove(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	lag := 400 * time.Millisecond
	sharded := func(o *Options) { o.ShardedPubSub, o.MaxLag = true, lag }
	a := newReplica(t, cl.Addrs(), sharded)
	b := newReplica(t, cl.Addrs(), sharded)
	waitProven(t, a)
	waitProven(t, b)
	ctx := context.Background()

	slot := int(mustInt(t, raw(t, cl.Addrs()[0]).ClusterKeySlot(ctx, a.channel())))
	from := slotOwner(t, cl, slot)
	to := cl.Addrs()[0]
	if to == from {
		to = cl.Addrs()[1]
	}
	// A key in the slot, so that the move has something to MIGRATE.
	if err := raw(t, from).Set(ctx, "{test:coherence}moved", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	stored := time.Now() // an entry fetched before the move
	moved := time.Now()
	moveSlot(t, cl, slot, from, to)

	// (1) Both replicas' channels sit on the new owner, none on the old.
	eventually(t, 20*time.Second, func() error {
		n, err := raw(t, to).PubSubShardNumSub(ctx, a.channel(), a.beatChannel(), b.beatChannel()).Result()
		if err != nil {
			return err
		}
		if n[a.channel()] != 2 || n[a.beatChannel()] != 1 || n[b.beatChannel()] != 1 {
			return fmt.Errorf("new owner %s has subscribers %v; A logged:\n%s", to, n, a.logs)
		}
		return nil
	})
	if left, err := raw(t, from).PubSubShardChannels(ctx, "*").Result(); err != nil || len(left) > 0 {
		t.Fatalf("old owner %s still holds shard channels %v (%v)", from, left, err)
	}
	if v, err := raw(t, to).Get(ctx, "{test:coherence}moved").Result(); err != nil || v != "v" {
		t.Fatalf("the slot's key on the new owner: %q, %v", v, err)
	}
	if !strings.Contains(a.logs.String(), "dropped by the cluster") {
		t.Fatalf("replica did not see the cluster drop its subscription:\n%s", a.logs)
	}

	// (2) The floor is past the move's start, and the proof past the floor.
	var p Proof
	eventually(t, 20*time.Second, func() error {
		if p = a.Proof(); !p.Proven.After(p.Floor) {
			return fmt.Errorf("proof %s not yet past the floor %s", p.Proven, p.Floor)
		}
		return nil
	})
	if !p.Floor.After(moved) {
		t.Fatalf("floor %s not past the move's start %s", p.Floor, moved)
	}

	// (3) What the tiers make of it, on a clock that keeps the fresh proof
	// within max_lag and puts the entry past it: only the floor refuses it.
	now := p.Proven.Add(lag - time.Nanosecond)
	clock := func() time.Time { return now }
	l1s, err := l1.New(l1.Options{MaxBytes: 1 << 20, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	// The proof as A reported it (a later gap could only refuse more).
	proven, floor := func() time.Time { return p.Proven }, func() time.Time { return p.Floor }
	tiers := cache.NewTiered(l1s, nil, cache.TieredOptions{Now: clock, MaxLag: lag, Proven: proven, Floor: floor})
	noFloor := cache.NewTiered(l1s, nil, cache.TieredOptions{Now: clock, MaxLag: lag, Proven: proven})
	before := entry("before", time.Hour)
	before.StoredAt = stored
	after := entry("after", time.Hour)
	after.StoredAt = p.Floor.Add(time.Nanosecond) // older than max_lag too, but after the floor
	if err := l1s.Set(ctx, "before", before); err != nil {
		t.Fatal(err)
	}
	if err := l1s.Set(ctx, "after", after); err != nil {
		t.Fatal(err)
	}
	l1s.Wait()
	if got, _, _ := noFloor.Lookup(ctx, "before"); got == nil {
		t.Fatal("test premise: the proof does not cover the entry")
	}
	if got, _, _ := tiers.Lookup(ctx, "before"); got != nil {
		t.Fatal("entry fetched before the slot moved served on a proof that does not cover the move")
	}
	if got, _, _ := tiers.Lookup(ctx, "after"); got == nil {
		t.Fatal("entry fetched after the new subscription refused on a fresh proof")
	}

	// (4) A peer's invalidation published after the move reaches A, after
	// the gap A reported for the move.
	if err := b.InvalidateTags(ctx, "after-move"); err != nil {
		t.Fatal(err)
	}
	gaps := 0
	for {
		inv := a.nextInvalidation(t, 10*time.Second)
		if inv.Gap {
			gaps++
			continue
		}
		if len(inv.Tags) != 1 || inv.Tags[0] != "after-move" {
			t.Fatalf("A got %+v, want the invalidation of after-move", inv)
		}
		break
	}
	if gaps == 0 {
		t.Fatal("A heard the invalidation without having reported the gap of the move")
	}
}

// slotOwner is the address of the master that serves slot.
func slotOwner(t *testing.T, cl *redistest.Cluster, slot int) string {
	t.Helper()
	ranges, err := raw(t, cl.Addrs()[0]).ClusterSlots(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ranges {
		if int(r.Start) <= slot && slot <= int(r.End) {
			return r.Nodes[0].Addr
		}
	}
	t.Fatalf("no master serves slot %d", slot)
	return ""
}

// moveSlot moves slot from master from to master to as redis-cli
// --cluster reshard does: to imports it, from migrates it, its keys are
// MIGRATEd, and every master is told the new owner, the importing one
// first (Redis cluster specification, "Live resharding").
func moveSlot(t *testing.T, cl *redistest.Cluster, slot int, from, to string) {
	t.Helper()
	ctx := context.Background()
	src, dst := raw(t, from), raw(t, to)
	srcID, dstID := mustString(t, src.ClusterMyID(ctx)), mustString(t, dst.ClusterMyID(ctx))
	must(t, dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err())
	must(t, src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err())
	host, port, _ := net.SplitHostPort(to)
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		must(t, err)
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(t, src.Do(ctx, args...).Err())
	}
	must(t, dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	must(t, src.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	for _, addr := range cl.Addrs() {
		if addr != from && addr != to {
			must(t, raw(t, addr).Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustString(t *testing.T, c *redis.StringCmd) string {
	t.Helper()
	v, err := c.Result()
	must(t, err)
	return v
}

func mustInt(t *testing.T, c *redis.IntCmd) int64 {
	t.Helper()
	v, err := c.Result()
	must(t, err)
	return v
}
