package cache_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
)

// manyStore is a memStore that can also read many keys at once, as the
// Redis tier does in one pipeline; it counts both kinds of read.
type manyStore struct {
	*memStore
	gets, manys atomic.Int64
}

func (s *manyStore) Get(ctx context.Context, key string) (*cache.Entry, bool, error) {
	s.gets.Add(1)
	return s.memStore.Get(ctx, key)
}

func (s *manyStore) GetMany(ctx context.Context, keys []string) ([]*cache.Entry, error) {
	s.manys.Add(1)
	out := make([]*cache.Entry, len(keys))
	for i, k := range keys {
		e, _, err := s.memStore.Get(ctx, k)
		if err != nil {
			return out, err
		}
		out[i] = e
	}
	return out, nil
}

func TestLookupManyOneL2RoundTrip(t *testing.T) {
	l1 := newL1(t)
	l2 := &manyStore{memStore: newMem()}
	tiered := cache.NewTiered(l1, l2, cache.TieredOptions{})
	ctx := context.Background()
	fresh := func(i int) *cache.Entry {
		return &cache.Entry{Status: 200, Body: fmt.Appendf(nil, "v%d", i), StoredAt: time.Now(), TTL: time.Minute}
	}
	keys := make([]string, 20)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
		switch {
		case i < 5: // in L1 (and L2)
			if err := tiered.Set(ctx, keys[i], fresh(i)); err != nil {
				t.Fatal(err)
			}
		case i < 15: // in L2 only
			_ = l2.Set(ctx, keys[i], fresh(i))
		}
	}
	l1.Wait()
	es, tiers, err := tiered.LookupMany(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range es {
		want := cache.Tier("")
		switch {
		case i < 5:
			want = cache.TierL1
		case i < 15:
			want = cache.TierL2
		}
		if tiers[i] != want || (want == "") != (e == nil) || e != nil && string(e.Body) != fmt.Sprintf("v%d", i) {
			t.Errorf("key %d: tier %q entry %v, want tier %q", i, tiers[i], e, want)
		}
	}
	if l2.manys.Load() != 1 || l2.gets.Load() != 0 {
		t.Fatalf("L2 reads: %d GetMany, %d Get; want 1 and 0", l2.manys.Load(), l2.gets.Load())
	}
	// The L2 hits filled L1.
	l1.Wait()
	if e, tier, _ := tiered.LookupLocal(ctx, keys[10]); e == nil || tier != cache.TierL1 {
		t.Fatal("an L2 hit of LookupMany did not fill L1")
	}
	// An L2 failure is a miss for the keys L1 lacks, not a failure of the rest.
	l2.getErr = errors.New("down")
	es, _, err = tiered.LookupMany(ctx, []string{keys[0], keys[19]})
	if err == nil || es[0] == nil || es[1] != nil {
		t.Fatalf("with L2 down: %v %v err=%v", es[0], es[1], err)
	}
}
