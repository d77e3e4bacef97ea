package cache_test

import (
	"context"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
)

// TestUnprovenChannelServesOnlyEntriesYoungerThanMaxLag: while the
// invalidation channel has not been proven within max_lag, an entry whose
// request left more than max_lag ago may predate a write this replica did
// not hear of; every lookup path treats it as a miss, and serves it again
// once the channel is proven.
func TestUnprovenChannelServesOnlyEntriesYoungerThanMaxLag(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_000_000, 0)
	const lag = time.Second
	proven := now.Add(-2 * lag)
	l1s, l2s := newMem(), newMem()
	var misses int
	tr := cache.NewTiered(l1s, l2s, cache.TieredOptions{
		Now:    func() time.Time { return now },
		MaxLag: lag,
		Proven: func() time.Time { return proven },
		Observe: func(_ cache.Tier, r cache.Result) {
			if r == cache.ResultMiss {
				misses++
			}
		},
	})
	old := &cache.Entry{Status: 200, StoredAt: now.Add(-lag - time.Millisecond), TTL: time.Hour}
	young := &cache.Entry{Status: 200, StoredAt: now.Add(-lag + time.Millisecond), TTL: time.Hour}
	_ = l1s.Set(ctx, "old1", old)
	_ = l2s.Set(ctx, "old2", old)
	_ = l1s.Set(ctx, "young1", young)
	_ = l2s.Set(ctx, "young2", young)

	hits := func() []string {
		var got []string
		for _, k := range []string{"old1", "old2", "young1", "young2"} {
			if e, _, _ := tr.Lookup(ctx, k); e != nil {
				got = append(got, k)
			}
		}
		if e, _, _ := tr.LookupLocal(ctx, "old1"); e != nil {
			got = append(got, "local:old1")
		}
		es, _, _ := tr.LookupMany(ctx, []string{"old1", "old2"})
		for i, e := range es {
			if e != nil {
				got = append(got, "many:"+[]string{"old1", "old2"}[i])
			}
		}
		return got
	}
	if got := hits(); len(got) != 2 || got[0] != "young1" || got[1] != "young2" {
		t.Fatalf("proof %v old: hits %v, want only the young entries", now.Sub(proven), got)
	}
	if l1s.has("old2") {
		t.Fatal("an entry refused from L2 was copied into L1")
	}
	proven = now.Add(-lag + time.Millisecond)
	if got := hits(); len(got) != 7 {
		t.Fatalf("proof fresh: hits %v, want all 7", got)
	}
}

// TestRefusedCountsEachRefusal: every stored entry the bound refuses is
// reported once per tier that held it, on every lookup path; a young entry
// or an absent key is not a refusal.
func TestRefusedCountsEachRefusal(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_000_000, 0)
	const lag = time.Second
	l1s, l2s := newMem(), newMem()
	refused := map[cache.Tier]int{}
	tr := cache.NewTiered(l1s, l2s, cache.TieredOptions{
		Now:     func() time.Time { return now },
		MaxLag:  lag,
		Proven:  func() time.Time { return now.Add(-2 * lag) },
		Refused: func(t cache.Tier) { refused[t]++ },
	})
	old := &cache.Entry{Status: 200, StoredAt: now.Add(-2 * lag), TTL: time.Hour}
	young := &cache.Entry{Status: 200, StoredAt: now, TTL: time.Hour}
	_ = l1s.Set(ctx, "old", old)
	_ = l2s.Set(ctx, "old", old)
	_ = l2s.Set(ctx, "old2", old)
	_ = l1s.Set(ctx, "young", young)
	tr.Lookup(ctx, "old")                                 // l1 and l2 refuse
	tr.Lookup(ctx, "young")                               // a hit
	tr.Lookup(ctx, "absent")                              // a plain miss
	tr.LookupMany(ctx, []string{"old2", "young", "nope"}) // l2 refuses old2
	if refused[cache.TierL1] != 1 || refused[cache.TierL2] != 2 {
		t.Errorf("refused %v, want l1:1 l2:2", refused)
	}
}
