package tombstone_test

import (
	"fmt"
	"strings"
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

// Past its byte budget the set folds its oldest tombstones into the
// overflow filter: what they refused is still refused, and the set stops
// growing. Entries with other tags are not refused (but for the rare one
// sharing a bucket): on 16d946c the fold was a purge of everything, and
// every innocent entry below was refused.
func TestBudgetFoldsOldestIntoFilter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	entry := func(requested time.Duration, tags ...string) *cache.Entry {
		return &cache.Entry{StoredAt: at(requested), Tags: tags}
	}
	// Room for three tombstones, whatever their tags' length.
	s := tombstone.NewBounded(10*time.Second, 3*(1+96))
	folded := 0
	s.OnFold(func(n int) { folded += n })
	for i, tag := range []string{"a", "b", "c", "d"} {
		s.Add(at(time.Duration(i+1)*time.Second), tag)
	}
	if s.Len() != 3 || folded != 1 {
		t.Fatalf("Len = %d, folded %d; want 3 within the budget and 1 folded", s.Len(), folded)
	}
	now := 5 * time.Second
	for _, tc := range []struct {
		e     *cache.Entry
		stale bool
	}{
		{entry(0, "a"), true},                      // folded, still refused
		{entry(1500*time.Millisecond, "a"), false}, // after a's invalidation
		{entry(1500*time.Millisecond, "b"), true},  // b is still a tombstone
		{entry(3500*time.Millisecond, "d"), true},
	} {
		if got := s.Stale(tc.e, at(now)); got != tc.stale {
			t.Errorf("Stale(stored %v, tags %v) = %v, want %v", tc.e.StoredAt.Sub(t0), tc.e.Tags, got, tc.stale)
		}
	}
	refused := 0
	const innocent = 1000
	for i := range innocent {
		if s.Stale(entry(500*time.Millisecond, fmt.Sprintf("x%d", i)), at(now)) {
			refused++
		}
	}
	// One folded tag in 65,536 buckets: about none of 1,000 share it.
	if refused > innocent/100 {
		t.Errorf("%d of %d entries with other tags refused after one tombstone was folded", refused, innocent)
	}
}

// A tag invalidated again is kept for a window from its latest
// invalidation, and expired tombstones leave as later ones arrive.
func TestReAddExtendsAndExpiredLeave(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	s := tombstone.New(10 * time.Second)
	s.Add(at(1*time.Second), "a")
	s.Add(at(2*time.Second), "b")
	s.Add(at(9*time.Second), "a")
	s.Add(at(13*time.Second), "z") // b (2s) is past the window; a (9s) is not
	if s.Len() != 2 {
		t.Fatalf("Len = %d, want 2 (a and z)", s.Len())
	}
	if !s.Stale(&cache.Entry{StoredAt: at(8 * time.Second), Tags: []string{"a"}}, at(13*time.Second)) {
		t.Error("entry requested before a's second invalidation is not stale")
	}
	if s.Stale(&cache.Entry{StoredAt: at(time.Second), Tags: []string{"b"}}, at(13*time.Second)) {
		t.Error("b's tombstone outlived its window")
	}
}

// A flood of writes to distinct long IDs within one window stays within
// the budget, and a tombstone costs the same whatever its tag's length:
// 10,000 tags of 4 KiB fit in 1 MiB without folding (on 16d946c, which kept
// the tags, 1 MiB held 250 of them and the rest became a purge of
// everything).
func TestDistinctTagFloodStaysWithinBudget(t *testing.T) {
	const budget = 1 << 20
	s := tombstone.NewBounded(time.Minute, budget)
	folded := 0
	s.OnFold(func(n int) { folded += n })
	now := time.Now()
	pad := strings.Repeat("9", 4<<10)
	const n = 10000
	for i := range n {
		s.Add(now, fmt.Sprintf("client:%s%d", pad, i))
	}
	if s.Len() != n || folded != 0 {
		t.Fatalf("Len = %d, folded %d after %d long tags; want all kept", s.Len(), folded, n)
	}
	if s.Stale(&cache.Entry{StoredAt: now.Add(-time.Second), Tags: []string{"client:7"}}, now) {
		t.Fatal("an entry of another tag is refused")
	}
	for i := range 3 * n {
		s.Add(now, fmt.Sprintf("more:%d", i))
	}
	if max := budget / 80; s.Len() > max {
		t.Fatalf("Len = %d, want at most %d", s.Len(), max)
	}
}

// Add must cost the same whatever the number of live tombstones (it once
// scanned them all on every call): ns/op is flat across the sizes.
func BenchmarkAddDistinct(b *testing.B) {
	for _, live := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("live=%d", live), func(b *testing.B) {
			s := tombstone.NewBounded(time.Hour, 1<<40)
			now := time.Now()
			for i := range live {
				s.Add(now, fmt.Sprintf("client:%d", i))
			}
			tags := make([]string, 4096)
			for i := range tags {
				tags[i] = fmt.Sprintf("new:%d", i)
			}
			i := 0
			for b.Loop() {
				s.Add(now, tags[i%len(tags)])
				i++
			}
		})
	}
}

// Widen: after a reload raises the upstream timeout, a tombstone refuses a
// fetch that ran longer than the old window; narrowing is refused.
func TestWiden(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	begun := &cache.Entry{StoredAt: at(0), Tags: []string{"a"}} // requested before the write
	for _, tc := range []struct {
		name   string
		widen  []time.Duration
		stored time.Duration // when the fetch finishes and asks
		stale  bool
	}{
		{"within the start-up window", nil, 15 * time.Second, true},
		{"past it, not widened", nil, 40 * time.Second, false},
		{"past it, widened", []time.Duration{70 * time.Second}, 40 * time.Second, true},
		{"widened, then narrowed", []time.Duration{70 * time.Second, 20 * time.Second}, 40 * time.Second, true},
		{"past the widened window", []time.Duration{70 * time.Second}, 75 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tombstone.New(20 * time.Second)
			s.Add(at(time.Second), "a")
			for _, w := range tc.widen {
				s.Widen(w)
			}
			if got := s.Stale(begun, at(tc.stored)); got != tc.stale {
				t.Errorf("Stale at %v = %v, want %v", tc.stored, got, tc.stale)
			}
		})
	}
}

// The hot path long after a purge of everything (the bench's purge before
// each round, an operator's POST /purge?all=1): every tombstone has left
// the window, so it costs what BenchmarkStaleNone does.
func BenchmarkStaleAfterExpiredPurge(b *testing.B) {
	s := tombstone.New(time.Second)
	s.AddAll(time.Now().Add(-time.Minute))
	e := &cache.Entry{StoredAt: time.Now(), Tags: []string{"user:123456", "route:user"}}
	now := time.Now()
	for b.Loop() {
		s.Stale(e, now)
	}
}
