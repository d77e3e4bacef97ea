package cache_test

import (
	"context"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
)

// TestLookupSharedReadsL2Only: LookupShared asks L2 alone, as Lookup does
// after an L1 miss (an L2 hit fills L1), and finds nothing without L2.
func TestLookupSharedReadsL2Only(t *testing.T) {
	ctx := context.Background()
	var asked []cache.Tier
	l1 := newL1(t)
	l2 := &manyStore{memStore: newMem()}
	tiered := cache.NewTiered(l1, l2, cache.TieredOptions{Observe: func(tier cache.Tier, _ cache.Result) { asked = append(asked, tier) }})
	fresh := &cache.Entry{Status: 200, Body: []byte("v"), StoredAt: time.Now(), TTL: time.Minute}
	_ = l2.Set(ctx, "k", fresh)
	e, tier, err := tiered.LookupShared(ctx, "k")
	if err != nil || e == nil || tier != cache.TierL2 || string(e.Body) != "v" {
		t.Fatalf("LookupShared: %v %q %v, want the L2 entry", e, tier, err)
	}
	if len(asked) != 1 || asked[0] != cache.TierL2 || l2.gets.Load() != 1 {
		t.Fatalf("tiers asked %v, L2 gets %d: want L2 once", asked, l2.gets.Load())
	}
	l1.Wait()
	if e, tier, _ := tiered.LookupLocal(ctx, "k"); e == nil || tier != cache.TierL1 {
		t.Errorf("the L2 hit did not fill L1: %v %q", e, tier)
	}
	if e, _, err := tiered.LookupShared(ctx, "absent"); e != nil || err != nil {
		t.Errorf("absent key: %v %v", e, err)
	}

	alone := cache.NewTiered(newL1(t), nil, cache.TieredOptions{})
	if e, tier, err := alone.LookupShared(ctx, "k"); e != nil || tier != "" || err != nil {
		t.Errorf("without L2: %v %q %v, want nothing", e, tier, err)
	}
}
