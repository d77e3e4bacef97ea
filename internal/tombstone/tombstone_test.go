package tombstone_test

import (
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/tombstone"
)

func TestStale(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	entry := func(requested time.Duration, tags ...string) *cache.Entry {
		return &cache.Entry{StoredAt: at(requested), Tags: tags}
	}
	cases := []struct {
		name  string
		setup func(s *tombstone.Set)
		e     *cache.Entry
		now   time.Duration
		stale bool
	}{
		{"nothing invalidated", func(s *tombstone.Set) {}, entry(0, "a"), time.Second, false},
		{"requested before the tag's invalidation", func(s *tombstone.Set) { s.Add(at(time.Second), "a") }, entry(0, "a"), 2 * time.Second, true},
		{"requested at the invalidation", func(s *tombstone.Set) { s.Add(at(time.Second), "a") }, entry(time.Second, "a"), 2 * time.Second, true},
		{"requested after it", func(s *tombstone.Set) { s.Add(at(time.Second), "a") }, entry(2*time.Second, "a"), 3 * time.Second, false},
		{"another tag", func(s *tombstone.Set) { s.Add(at(time.Second), "b") }, entry(0, "a"), 2 * time.Second, false},
		{"past the window", func(s *tombstone.Set) { s.Add(at(time.Second), "a") }, entry(0, "a"), 12 * time.Second, false},
		{"purge of everything", func(s *tombstone.Set) { s.AddAll(at(time.Second)) }, entry(0), 2 * time.Second, true},
		{"an empty Add keeps the purge of everything", func(s *tombstone.Set) {
			s.AddAll(at(time.Second))
			s.Add(at(2 * time.Second))
		}, entry(0), 3 * time.Second, true},
		{"a later tag Add keeps the purge of everything", func(s *tombstone.Set) {
			s.AddAll(at(time.Second))
			s.Add(at(2*time.Second), "z")
		}, entry(0, "a"), 3 * time.Second, true},
		{"nil entry", func(s *tombstone.Set) { s.AddAll(at(time.Second)) }, nil, 2 * time.Second, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tombstone.New(10 * time.Second)
			tc.setup(s)
			if got := s.Stale(tc.e, at(tc.now)); got != tc.stale {
				t.Fatalf("Stale = %v, want %v", got, tc.stale)
			}
		})
	}
}

// The hot path, with no tombstones live: one atomic load.
func BenchmarkStaleNone(b *testing.B) {
	s := tombstone.New(time.Second)
	e := &cache.Entry{StoredAt: time.Now(), Tags: []string{"a", "b"}}
	now := time.Now()
	for b.Loop() {
		s.Stale(e, now)
	}
}
