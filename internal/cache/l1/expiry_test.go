package l1

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is time.Now moved forward by what the test advances it.
type fakeClock struct{ ahead atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *fakeClock) advance(d time.Duration) { c.ahead.Add(int64(d)) }
func (c *fakeClock) since() time.Duration    { return time.Duration(c.ahead.Load()) }

// Ristretto keeps entries without a TTL; the index expires them. An entry
// whose lifetime has ended must leave the index, the gauges and ristretto
// (its memory comes back), whatever its tags, and one with time left must
// stay and be served.
func TestSweepRetiresExpired(t *testing.T) {
	t.Parallel()
	var clock fakeClock
	s := newStore(t, Options{Now: clock.now})
	const n = 600 // more than a sweep retires per hold of the lock
	for i := range n {
		id := fmt.Sprint(i)
		set(t, s, "short"+id, entry("x", time.Minute, "_route:users", "user:"+id, "uri:/users/"+id))
	}
	long := entry("y", time.Hour, "_route:users", "user:long")
	set(t, s, "long", long)
	s.Wait()
	if s.Items() != n+1 {
		t.Fatalf("Items() = %d, want %d", s.Items(), n+1)
	}
	checkIndex(t, s)

	clock.advance(2 * time.Minute)
	eventually(t, 30*time.Second, "expired entries still counted", func() bool { return s.Items() == 1 })
	s.Wait()
	for i := range n {
		key := fmt.Sprintf("short%d", i)
		if _, ok := s.c.Get(s.hash(key)); ok {
			t.Fatalf("ristretto still holds expired %q", key)
		}
	}
	if got := get(t, s, "long"); got != long {
		t.Fatalf("Get(long) = %v, want the entry with time left", got)
	}
	if keys, _ := s.KeysWithTag("_route:users", 10); len(keys) != 1 || keys[0] != "long" {
		t.Fatalf("KeysWithTag = %q, want [long]", keys)
	}
	checkIndex(t, s)
	s.mu.Lock()
	if len(s.expiry) != 1 || len(s.tags) != 2 {
		t.Errorf("index holds %d expiry buckets and %d tag hashes, want 1 and 2", len(s.expiry), len(s.tags))
	}
	s.mu.Unlock()

	// The sweep stops when nothing is left, and comes back with a write.
	clock.advance(2 * time.Hour)
	eventually(t, 30*time.Second, "last entry still counted", func() bool { return s.Items() == 0 })
	set(t, s, "again", entry("z", time.Minute))
	clock.advance(2 * time.Minute)
	eventually(t, 30*time.Second, "entry written after an idle sweep still counted", func() bool { return s.Items() == 0 })
	checkIndex(t, s)
}

// Get answers by the store's clock: an entry past its lifetime is a miss
// at once, before any sweep, though ristretto still holds it.
func TestGetMissesPastLifetime(t *testing.T) {
	t.Parallel()
	var clock fakeClock
	s := newStore(t, Options{Now: clock.now})
	set(t, s, "k", entry("x", time.Minute, "t"))
	s.Wait()
	if get(t, s, "k") == nil {
		t.Fatal("miss right after Set+Wait")
	}
	clock.advance(2 * time.Minute)
	if got := get(t, s, "k"); got != nil {
		t.Fatalf("Get = %+v past the entry's lifetime, want miss", got)
	}
}

// checkExpiryLocked asserts that every indexed item is in the list of its
// deadline's bucket, once, and nothing else is.
func checkExpiryLocked(t *testing.T, s *Store) {
	t.Helper()
	listed := 0
	for b, h := range s.expiry {
		for it := h; ; it = it.expNext {
			if it.expNext.expPrev != it || it.expPrev.expNext != it {
				t.Errorf("expiry bucket %d: links broken at key %q", b, it.key)
				break
			}
			if bucket(it.deadline) != b || s.keys[it.h] != it {
				t.Errorf("expiry bucket %d lists %q (deadline %d, live %v)", b, it.key, it.deadline, s.keys[it.h] == it)
			}
			listed++
			if it.expNext == h {
				break
			}
		}
	}
	if listed != len(s.keys) {
		t.Errorf("expiry lists hold %d items, index %d", listed, len(s.keys))
	}
}

// The sweep walks the buckets from the first not yet swept: entries whose
// deadlines lie far apart leave each in its turn, and an entry written
// after the clock went back (its deadline before the buckets already
// swept) leaves too.
func TestSweepWalksInOrder(t *testing.T) {
	t.Parallel()
	var clock fakeClock
	s := newStore(t, Options{Now: clock.now})
	ttls := []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 365 * 24 * time.Hour}
	for i, ttl := range ttls {
		set(t, s, fmt.Sprint("k", i), entry("x", ttl))
	}
	for i, ttl := range ttls {
		clock.advance(ttl - clock.since() + 2*time.Second)
		left := int64(len(ttls) - i - 1)
		eventually(t, 30*time.Second, fmt.Sprintf("after %v, %d entries left", ttl, left), func() bool { return s.Items() == left })
		checkIndex(t, s)
	}
	clock.advance(-48 * time.Hour)
	set(t, s, "back", entry("x", time.Minute))
	clock.advance(2 * time.Minute)
	eventually(t, 30*time.Second, "the entry written after the clock went back left", func() bool { return s.Items() == 0 })
	checkIndex(t, s)
}

// BenchmarkSweepWideSpread is a sweep's cost with the store's entries'
// deadlines spread over many buckets, none of them due: it holds mu for
// that long every second.
func BenchmarkSweepWideSpread(b *testing.B) {
	s := newStore(b, Options{MaxBytes: 256 << 20})
	for i := range 100_000 {
		set(b, s, fmt.Sprint("k", i), entry("x", time.Duration(i+1)*time.Hour))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b.ResetTimer()
	for b.Loop() {
		s.sweepLocked(sweepChunk)
	}
}

// A clock that jumps far ahead (an Options.Now may) leaves the sweep
// further behind than it holds buckets: it finds the next bucket held
// among those, not by walking the gap one empty bucket at a time under mu
// (6.3 billion for the 200 years here; a year's took 25 s under -race).
func TestSweepAfterClockJump(t *testing.T) {
	t.Parallel()
	var clock fakeClock
	s := newStore(t, Options{Now: clock.now})
	const far = 200 * 365 * 24 * time.Hour
	set(t, s, "soon", entry("x", time.Minute))
	set(t, s, "far", entry("x", far))
	clock.advance(2 * time.Minute)
	eventually(t, 30*time.Second, "soon left", func() bool { return s.Items() == 1 })
	clock.advance(far)
	eventually(t, 30*time.Second, "far left", func() bool { return s.Items() == 0 })
	checkIndex(t, s)
}
