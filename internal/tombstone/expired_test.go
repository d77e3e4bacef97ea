package tombstone

import (
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
)

// Once every tombstone has left the window, Stale answers from the fast
// path: it neither waits for the lock nor hashes a tag. Tombstones leave
// only when an Add prunes, so without the fast path every lookup after the
// last invalidation (a purge of everything, the last write) took the read
// lock for as long as no other invalidation came. Here the test holds the
// write lock: a Stale that takes the read lock never returns.
func TestStaleSkipsTheLockOnceEveryTombstoneExpired(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		setup func(s *Set)
	}{
		{"purge of everything", func(s *Set) { s.AddAll(t0) }},
		{"a tag", func(s *Set) { s.Add(t0, "a") }},
		{"both, the purge first", func(s *Set) { s.AddAll(t0.Add(-time.Second)); s.Add(t0, "a") }},
		{"widened before the window ended", func(s *Set) { s.Add(t0, "a"); s.Widen(5 * time.Second) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(5 * time.Second)
			tc.setup(s)
			e := &cache.Entry{StoredAt: t0.Add(-time.Minute), Tags: []string{"a"}}
			if !s.Stale(e, t0.Add(5*time.Second)) {
				t.Fatal("Stale at the window's end = false, want true")
			}
			s.mu.Lock()
			done := make(chan bool, 1)
			go func() { done <- s.Stale(e, t0.Add(5*time.Second+time.Nanosecond)) }()
			select {
			case stale := <-done:
				s.mu.Unlock()
				if stale {
					t.Fatal("Stale past every tombstone's window = true, want false")
				}
			case <-time.After(10 * time.Second):
				s.mu.Unlock()
				<-done
				t.Fatal("Stale past every tombstone's window waited for the set's lock")
			}
		})
	}
}

// Widen moves the fast path's bound with the window: an entry within the
// wider window is still refused.
func TestStaleAfterWidenStillRefuses(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := New(5 * time.Second)
	s.AddAll(t0)
	s.Widen(20 * time.Second)
	if !s.Stale(&cache.Entry{StoredAt: t0.Add(-time.Second)}, t0.Add(15*time.Second)) {
		t.Fatal("Stale within the widened window = false, want true")
	}
}
