package l2

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/cache/l2/mget"
	"github.com/sidecache/sidecache/internal/redistest"
)

// The L2 hit's lean client (internal/cache/l2/mget) as the store uses it;
// the client's own tests are its package's.

// TestLeanErrorReply: the lean client's error reply (mget.Error, here the
// AUTH of a Redis without a password) is a redis.Error that unavailable
// classifies as it does go-redis's: not unavailability.
func TestLeanErrorReply(t *testing.T) {
	srv := redistest.Start(t)
	o := Options{Addrs: []string{srv.Addr()}, Password: "secret"}
	p := mget.New(leanOptions(o, 2))
	t.Cleanup(p.Close)
	err := p.MGet(context.Background(), time.Now(), time.Now().Add(5*time.Second), [3]string{"a"}, nil, func([][]byte) {})
	var rerr redis.Error
	if !errors.As(err, &rerr) || unavailable(err) {
		t.Fatalf("mget = %v; want a redis.Error that is not unavailability", err)
	}
}

// TestStoreHitReadsLean: a single Redis's L2 hit goes through the lean
// client, and a paused Redis fails it within the store's Timeout (the
// breaker counts it); Cluster and Sentinel have no lean client.
func TestStoreHitReadsLean(t *testing.T) {
	srv := redistest.Start(t)
	r := newReplica(t, []string{srv.Addr()}, func(o *Options) { o.Timeout = 200 * time.Millisecond })
	ctx := context.Background()
	if r.lean == nil {
		t.Fatal("no lean client on a single Redis")
	}
	if err := r.Set(ctx, "k", entry("v", time.Minute, "client:1")); err != nil {
		t.Fatal(err)
	}
	r.flush(t)
	if _, hit := r.mustGet(t, "k"); !hit {
		t.Fatal("miss")
	}
	if n := r.lean.Idle(); n != 1 {
		t.Fatalf("lean pool holds %d connections after a hit, want 1", n)
	}
	if err := raw(t, srv.Addr()).Do(ctx, "CLIENT", "PAUSE", "1000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	_, _, err := r.Get(ctx, "k")
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Get on a paused Redis = %v; want a timeout", err)
	}
	if f := r.fails.Load(); f != 1 {
		t.Fatalf("breaker counted %d failures, want 1", f)
	}
}

func TestClusterHasNoLean(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	r := newReplica(t, c.Addrs())
	if r.lean != nil {
		t.Fatal("a lean client in Cluster")
	}
	ctx := context.Background()
	if err := r.Set(ctx, "k", entry("v", time.Minute, "client:1")); err != nil {
		t.Fatal(err)
	}
	r.flush(t)
	for i := range 2 { // the script's read, then the guessed one
		if _, hit := r.mustGet(t, "k"); !hit {
			t.Fatalf("read %d: miss", i)
		}
	}
}
