package l2

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/redistest"
)

// TestSentinel runs a replica pair against Redis found through Sentinel:
// round trips and pub/sub through the master the sentinels name, then a
// failover, after which the store must find the promoted replica by itself.
func TestSentinel(t *testing.T) {
	sn := redistest.StartSentinel(t, "sidecache")
	sentinel := func(o *Options) {
		o.MasterName = sn.Name()
		// Several addresses would mean a Cluster without MasterName;
		// setting Cluster too checks that Sentinel wins.
		o.Cluster = true
	}
	// a is the one driven through the failover: a Timeout shorter than
	// newReplica's bounds each failing call, yet long enough for a
	// loaded machine (a spurious timeout there is retried below).
	a := newReplica(t, sn.SentinelAddrs(), sentinel, func(o *Options) { o.Timeout = time.Second })
	b := newReplica(t, sn.SentinelAddrs(), sentinel)
	a.waitUp(t)
	ctx := context.Background()

	if _, ok := a.rdb.(*redis.Client); !ok {
		t.Fatalf("MasterName gave a %T, want a failover *redis.Client", a.rdb)
	}
	if a.lean != nil {
		t.Fatal("a lean client under Sentinel: it would not follow a failover")
	}

	// Round trips, landing on the master the sentinels name.
	want := entry("v1", time.Minute, "tag")
	if err := a.Set(ctx, "k1", want); err != nil {
		t.Fatal(err)
	}
	a.flush(t)
	got, ok := b.mustGet(t, "k1")
	if !ok {
		t.Fatal("peer missed k1")
	}
	sameEntry(t, got, want)
	master := raw(t, sn.Master().Addr())
	if n, err := master.Exists(ctx, "test:e:k1").Result(); err != nil || n != 1 {
		t.Fatalf("EXISTS test:e:k1 on the master = %d, %v", n, err)
	}

	// Invalidation reaches the peer through the master's pub/sub.
	if err := a.InvalidateTags(ctx, "tag"); err != nil {
		t.Fatal(err)
	}
	inv := b.nextInvalidation(t, 5*time.Second)
	if !slices.Equal(inv.Tags, []string{"tag"}) || len(inv.Keys) != 0 || inv.All {
		t.Fatalf("peer got %+v", inv)
	}
	if _, ok := b.mustGet(t, "k1"); ok {
		t.Fatal("k1 still cached after its tag was invalidated")
	}

	// An entry the replica holds before the failover, so it must still be
	// there after: proof the store reads from the promoted replica.
	if err := a.Set(ctx, "before", entry("kept", time.Minute)); err != nil {
		t.Fatal(err)
	}
	a.flush(t)
	if n, err := master.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v: write not replicated", n, err)
	}

	killed := time.Now()
	sn.Master().Kill()

	// Until the sentinels agree the master is down (1 s without an
	// answer) they still name it, so calls are refused at once and open
	// the breaker well before any promotion.
	for i := 0; a.Up(); i++ {
		if i > 20 {
			t.Fatal("breaker still closed after 20 Gets with the master killed")
		}
		if _, _, err := a.Get(ctx, "before"); err == nil {
			t.Fatal("Get succeeded with the master killed and none promoted")
		}
	}
	if up := a.nextState(t, time.Second); up {
		t.Fatal("OnStateChange(true) with the master killed")
	}

	deadline := time.Now().Add(20 * time.Second)
	for {
		addr, err := sn.MasterAddr()
		if err == nil && addr == sn.Replica().Addr() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sentinels did not promote the replica in 20s: master = %q, %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	promoted := time.Since(killed)

	// The probe finds the new master through the sentinels.
	if up := a.nextState(t, 15*time.Second); !up {
		t.Fatal("want OnStateChange(true) after the failover")
	}
	recovered := time.Since(killed)

	eventually(t, 15*time.Second, func() error {
		if err := a.Set(ctx, "k2", entry("v2", time.Minute, "tag2")); err != nil {
			return err
		}
		if err := a.Flush(ctx); err != nil {
			return err
		}
		e, ok, err := b.Get(ctx, "k2")
		if err != nil || !ok || string(e.Body) != "v2" {
			return fmt.Errorf("peer Get(k2) after failover = %v, %v, %v", e, ok, err)
		}
		e, ok, err = a.Get(ctx, "before")
		if err != nil || !ok || string(e.Body) != "kept" {
			return fmt.Errorf("Get(before) after failover = %v, %v, %v", e, ok, err)
		}
		return nil
	})
	roundTrip := time.Since(killed)
	promotedRaw := raw(t, sn.Replica().Addr())
	if n, err := promotedRaw.Exists(ctx, "test:e:k2").Result(); err != nil || n != 1 {
		t.Fatalf("EXISTS test:e:k2 on the promoted replica = %d, %v", n, err)
	}

	// Both subscriptions moved to the new master and reported the gap.
	for _, r := range []*replica{a, b} {
		if inv := r.nextInvalidation(t, 15*time.Second); !inv.All {
			t.Fatalf("first message after the failover = %+v, want All", inv)
		}
		r.waitSubscribed(t)
	}
	eventually(t, 15*time.Second, func() error { return a.InvalidateTags(ctx, "tag2") })
	inv = b.nextInvalidation(t, 5*time.Second)
	if !slices.Equal(inv.Tags, []string{"tag2"}) || len(inv.Keys) != 0 {
		t.Fatalf("after failover peer got %+v", inv)
	}

	t.Logf("master killed: replica promoted after %s, breaker up after %s, round trip after %s",
		promoted.Round(time.Millisecond), recovered.Round(time.Millisecond), roundTrip.Round(time.Millisecond))
}
