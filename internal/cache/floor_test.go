package cache_test

import (
	"context"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
)

// TestFloorLimitsProof: after the channel was resubscribed (a gap whose
// messages may be lost), a fresh proof vouches only for entries fetched
// after the floor; older ones stay and are served while younger than
// max_lag, and are misses after that.
func TestFloorLimitsProof(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_000_000, 0)
	const lag = time.Second
	floor := now.Add(-lag / 2)
	l1s := newMem()
	tr := cache.NewTiered(l1s, nil, cache.TieredOptions{
		Now:    func() time.Time { return now },
		MaxLag: lag,
		Proven: func() time.Time { return now }, // proven just now
		Floor:  func() time.Time { return floor },
	})
	beforeOld := &cache.Entry{Status: 200, StoredAt: floor.Add(-lag), TTL: time.Hour}
	beforeYoung := &cache.Entry{Status: 200, StoredAt: floor.Add(-time.Millisecond), TTL: time.Hour}
	after := &cache.Entry{Status: 200, StoredAt: floor.Add(time.Millisecond), TTL: time.Hour}
	_ = l1s.Set(ctx, "beforeOld", beforeOld)
	_ = l1s.Set(ctx, "beforeYoung", beforeYoung)
	_ = l1s.Set(ctx, "after", after)
	hits := func() (got []string) {
		for _, k := range []string{"beforeOld", "beforeYoung", "after"} {
			if e, _, _ := tr.Lookup(ctx, k); e != nil {
				got = append(got, k)
			}
		}
		return got
	}
	if got := hits(); len(got) != 2 || got[0] != "beforeYoung" || got[1] != "after" {
		t.Fatalf("hits %v, want beforeYoung and after", got)
	}
	now = now.Add(lag) // beforeYoung is now older than max_lag; after is covered by the proof
	if got := hits(); len(got) != 1 || got[0] != "after" {
		t.Fatalf("hits %v a max_lag later, want after alone", got)
	}
	if !l1s.has("beforeOld") {
		t.Fatal("an entry the proof no longer covers was dropped from L1")
	}
}
