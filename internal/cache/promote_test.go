package cache_test

import (
	"context"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l2"
	"github.com/sidecache/sidecache/internal/redistest"
)

// TestPromotedL2BodyOwnsItsMemory is TestPromotedBodyOwnsItsMemory with
// the real L2: its decoded body ends where the Redis reply does, so its
// capacity is its length and only the entry itself can say that it
// shares the reply (with the entry's encoded header and the framing). The
// entry promoted into L1 must have a body of its own.
func TestPromotedL2BodyOwnsItsMemory(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	st, err := l2.New(ctx, l2.Options{Addrs: []string{srv.Addr()}, Prefix: "promote:", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	e := fresh(time.Hour)
	e.Body = []byte("a body kept in L1")
	if err := st.Set(ctx, "k", e); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, ok, _ := st.Get(ctx, "k"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the entry never reached Redis")
		}
	}
	a := newMem()
	tiered := cache.NewTiered(a, st, cache.TieredOptions{})
	got, tier, err := tiered.Lookup(ctx, "k")
	if err != nil || tier != cache.TierL2 || got == nil || string(got.Body) != string(e.Body) {
		t.Fatalf("lookup = %+v, %q, %v; want the L2 entry", got, tier, err)
	}
	kept := a.m["k"]
	if kept == nil {
		t.Fatal("not promoted into L1")
	}
	if string(kept.Body) != string(e.Body) || &kept.Body[0] == &got.Body[0] {
		t.Fatalf("L1 keeps body %q sharing the L2 reply: %v", kept.Body, &kept.Body[0] == &got.Body[0])
	}
}
