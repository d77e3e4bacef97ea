package cache_test

import (
	"context"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
)

// atStore is a memStore whose reads through GetAt record the clock
// reading they were handed (l2.Store counts its timeout from it).
type atStore struct {
	*memStore
	at  []time.Time
	got int // reads through Get
}

func (s *atStore) Get(ctx context.Context, key string) (*cache.Entry, bool, error) {
	s.got++
	return s.memStore.Get(ctx, key)
}

func (s *atStore) GetAt(ctx context.Context, key string, now time.Time) (*cache.Entry, bool, error) {
	s.at = append(s.at, now)
	return s.memStore.Get(ctx, key)
}

// An L2 read is handed the clock reading its lookup judges the entry by,
// so that the store does not read the clock again for its deadline; with
// a test's clock (TieredOptions.Now) it reads through Get, since that
// clock is no deadline's.
func TestTieredHandsL2ItsClock(t *testing.T) {
	ctx := context.Background()
	e := &cache.Entry{Status: 200, TTL: time.Hour, StoredAt: time.Now()}

	live := &atStore{memStore: newMem()}
	live.m["k"] = e
	before := time.Now()
	tr := cache.NewTiered(nil, live, cache.TieredOptions{})
	for _, look := range []func(context.Context, string) (*cache.Entry, cache.Tier, error){tr.Lookup, tr.LookupShared} {
		if got, tier, err := look(ctx, "k"); err != nil || got != e || tier != cache.TierL2 {
			t.Fatalf("lookup: %v %v %v", got, tier, err)
		}
	}
	if len(live.at) != 2 || live.got != 0 || live.at[0].Before(before) || live.at[1].After(time.Now()) {
		t.Fatalf("GetAt got %v, Get %d reads; want two GetAt reads with the lookup's clock", live.at, live.got)
	}

	fake := &atStore{memStore: newMem()}
	fake.m["k"] = e
	now := time.Now()
	tf := cache.NewTiered(nil, fake, cache.TieredOptions{Now: func() time.Time { return now }})
	if got, _, err := tf.Lookup(ctx, "k"); err != nil || got != e {
		t.Fatalf("lookup: %v %v", got, err)
	}
	if len(fake.at) != 0 || fake.got != 1 {
		t.Fatalf("with a test's clock: GetAt got %v, Get %d reads; want Get only", fake.at, fake.got)
	}
}
