package l1

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
)

// A purge of a large tag holds mu for at most purgeChunk entries at a
// time, and still drops them all and counts them: 10,000 entries under
// one tag and 10,000 under another, purged in one call, beside 1,000
// under a third.
func TestDeleteTagsHoldsMuPerChunk(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{MaxBytes: 1 << 30})
	const n = 10_000
	for i := range n {
		set(t, s, fmt.Sprintf("t%d", i), entry("v", time.Hour, "_route:t", fmt.Sprintf("id:%d", i)))
		set(t, s, fmt.Sprintf("u%d", i), entry("v", time.Hour, "_route:u"))
		if i%10 == 0 {
			set(t, s, fmt.Sprintf("k%d", i), entry("v", time.Hour, "_route:k"))
		}
	}
	s.Wait()
	if got := s.DeleteTags("_route:t", "nope", "_route:u"); got != 2*n {
		t.Fatalf("DeleteTags = %d, want %d", got, 2*n)
	}
	s.mu.Lock()
	most := s.heldMost
	s.mu.Unlock()
	if most > purgeChunk {
		t.Errorf("DeleteTags visited %d entries in one hold of mu, want at most %d", most, purgeChunk)
	}
	for i := range n {
		if get(t, s, fmt.Sprintf("t%d", i)) != nil || get(t, s, fmt.Sprintf("u%d", i)) != nil {
			t.Fatalf("entry %d served after the purge of its tag", i)
		}
	}
	if keys, _ := s.KeysWithTag("_route:k", n); len(keys) != n/10 {
		t.Fatalf("KeysWithTag(_route:k) = %d keys after the purge of others, want %d", len(keys), n/10)
	}
	checkIndex(t, s)
}

// DeleteTags walks its tag's list a chunk at a time while Sets link new
// entries, Deletes, rewrites, evictions and the expiry sweep unlink the
// ones it stands next to, another DeleteTags of the same tag walks beside
// it, KeysWithTag lists it, and the store is sometimes cleared. Each
// round, every entry under the tag stored before the call is gone when it
// returns; where nothing else may drop them (no eviction, no Clear), the
// entries under another tag of the same index hash, which the walk steps
// over, are all still served; and the index is whole once the round is
// over.
func TestDeleteTagsRacingWrites(t *testing.T) {
	t.Parallel()
	rounds := 24
	if testing.Short() {
		rounds = 8
	}
	for r := range rounds {
		raceDeleteTags(t, r)
	}
}

func raceDeleteTags(t *testing.T, r int) {
	evict, clearing := r%3 == 0, r%4 == 1
	var clock atomic.Int64 // nanoseconds past start, advanced by the sweeper
	start := time.Now()
	opts := Options{MaxBytes: 256 << 20, Now: func() time.Time { return start.Add(time.Duration(clock.Load())) }}
	if evict {
		opts.MaxBytes = 1 << 20 // about a third of what the round writes
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// 2^16 hashes: a tag whose hash is the route tag's is found quickly.
	s.hashMask = 1<<16 - 1
	const tag, n = "_route:r", 1500 // several chunks
	other := ""
	for i := 0; other == ""; i++ {
		if o := fmt.Sprintf("_route:o%d", i); s.hash(o) == s.hash(tag) {
			other = o
		}
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, uint64(r)))
	key := func(i int) string { return fmt.Sprintf("r/%d", i) }
	taken := map[uint64]bool{} // the hashes the other keys may have
	for i := range 2 * n {
		taken[s.hash(key(i))] = true
	}
	// Before the call: entries under tag (some expiring soon, for the
	// sweep), and bystanders under the colliding tag, of keys whose hash
	// no other key has (a Set drops the live key of its hash).
	before := map[string]*cache.Entry{}
	for i := range n {
		ttl := time.Hour
		if i%5 == 0 {
			ttl = time.Duration(1+rng.IntN(3)) * time.Second
		}
		e := entry("v", ttl, tag, fmt.Sprintf("id:%d", i))
		if s.Set(ctx, key(i), e) == nil {
			before[key(i)] = e
		}
	}
	bystanders := map[string]*cache.Entry{}
	for i := 0; len(bystanders) < 200; i++ {
		k := fmt.Sprintf("b/%d", i)
		if taken[s.hash(k)] {
			continue
		}
		taken[s.hash(k)] = true
		e := entry("v", 1000*time.Hour, other)
		if s.Set(ctx, k, e) == nil {
			bystanders[k] = e
		}
	}
	s.Wait()
	var held []string
	for k, e := range bystanders {
		if get(t, s, k) == e {
			held = append(held, k)
		}
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	racer := func(seed uint64, do func(rng *rand.Rand)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(r)))
			for {
				select {
				case <-stop:
					return
				default:
					do(rng)
				}
			}
		}()
	}
	racer(1, func(rng *rand.Rand) { // fills under the tag: new keys, and rewrites
		_ = s.Set(ctx, key(rng.IntN(2*n)), entry("new", time.Hour, "id:x", tag))
	})
	racer(2, func(rng *rand.Rand) { // deletes
		_ = s.Delete(ctx, key(rng.IntN(n)))
	})
	racer(3, func(rng *rand.Rand) { // the sweep, as its timer runs it
		// The clock stops short of the hour the other entries live: past
		// it, on a loaded machine whose purge ran long enough, they
		// expired, Get missed them before a sweep retired them, and
		// checkIndex failed on what is no defect (a lapsed entry is a
		// miss until the sweep).
		if clock.Load() < int64(30*time.Minute) {
			clock.Add(int64(10 * time.Millisecond))
		}
		s.mu.Lock()
		s.sweepLocked(sweepChunk)
		s.mu.Unlock()
	})
	racer(4, func(rng *rand.Rand) {
		s.KeysWithTag(tag, 10)
		if clearing && rng.IntN(20) == 0 {
			s.Clear()
		}
	})
	if evict {
		racer(5, func(rng *rand.Rand) { // ristretto evicts under its bound
			k := fmt.Sprintf("x/%d", rng.IntN(1<<20))
			if !taken[s.hash(k)] {
				_ = s.Set(ctx, k, entry("xxxxxxxxxxxxxxxx", time.Hour, "_route:x"))
			}
		})
	}
	var second sync.WaitGroup
	second.Add(1)
	go func() { // another purge of the same tag, beside the checked one
		defer second.Done()
		s.DeleteTags(tag)
	}()
	s.DeleteTags(tag)
	for k, e := range before {
		if get(t, s, k) == e {
			t.Fatalf("round %d: %s stored before DeleteTags(%s) still served after it", r, k, tag)
		}
	}
	close(stop)
	wg.Wait()
	second.Wait()
	if !evict && !clearing {
		for _, k := range held {
			if get(t, s, k) != bystanders[k] {
				t.Fatalf("round %d: %s, under %s (the hash of %s), dropped by the purge of %s", r, k, other, tag, tag)
			}
		}
	}
	checkIndex(t, s)
}

// The cursor is made only for a tag that has entries: the invalidation of
// tags nothing was cached under (an id never read) allocates nothing.
func TestDeleteTagsAbsentAllocatesNothing(t *testing.T) {
	s := newStore(t, Options{MaxBytes: 1 << 20})
	set(t, s, "k", entry("v", time.Hour, "_route:k"))
	if allocs := testing.AllocsPerRun(100, func() { s.DeleteTags("id:1", "uri:/x") }); allocs != 0 {
		t.Errorf("DeleteTags of absent tags: %v allocations, want 0", allocs)
	}
	if get(t, s, "k") == nil {
		t.Fatal("an entry under another tag dropped")
	}
}
