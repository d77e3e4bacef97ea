// Package cache_test, not cache: these tests use the real l1 store, and l1
// imports cache.
package cache_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
)

// memStore is a plain map Store whose operations fail on demand. It keeps
// whatever it is given, expired or not, which lets tests hand Tiered
// entries a real tier would already have dropped.
type memStore struct {
	mu                     sync.Mutex
	m                      map[string]*cache.Entry
	getErr, setErr, delErr error
}

func newMem() *memStore { return &memStore{m: map[string]*cache.Entry{}} }

func (s *memStore) Get(_ context.Context, key string) (*cache.Entry, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.getErr != nil {
		return nil, false, s.getErr
	}
	e, ok := s.m[key]
	return e, ok, nil
}

func (s *memStore) Set(_ context.Context, key string, e *cache.Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.setErr != nil {
		return s.setErr
	}
	s.m[key] = e
	return nil
}

func (s *memStore) Delete(_ context.Context, keys ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.delErr != nil {
		return s.delErr
	}
	for _, k := range keys {
		delete(s.m, k)
	}
	return nil
}

func (s *memStore) has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[key]
	return ok
}

func newL1(t *testing.T) *l1.Store {
	t.Helper()
	s, err := l1.New(l1.Options{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// observations records what Tiered reports to its observer.
type observations struct {
	mu  sync.Mutex
	got []string
}

func (o *observations) observe(tier cache.Tier, r cache.Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, string(tier)+"/"+string(r))
}

func (o *observations) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	got := o.got
	o.got = nil
	return got
}

func fresh(ttl time.Duration) *cache.Entry {
	return &cache.Entry{Status: 200, Body: []byte("body"), StoredAt: time.Now(), TTL: ttl, Tags: []string{"t"}}
}

var errBoom = errors.New("boom")

func TestTieredLookup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dead := &cache.Entry{Status: 200, StoredAt: time.Now().Add(-time.Hour), TTL: time.Minute}
	live := fresh(time.Hour)
	// Past its freshness, within a stale window: kept, and L2 read too.
	stale := &cache.Entry{Status: 200, StoredAt: time.Now().Add(-2 * time.Minute), TTL: time.Minute, StaleIfError: time.Hour}
	tests := []struct {
		name     string
		l1, l2   *memStore // nil: no such tier
		want     *cache.Entry
		wantTier cache.Tier
		wantErr  bool
		observed []string
		filled   bool // whether L1 holds the key afterwards
	}{
		{name: "l1 hit", l1: &memStore{m: map[string]*cache.Entry{"k": live}}, l2: newMem(),
			want: live, wantTier: cache.TierL1, observed: []string{"l1/hit"}, filled: true},
		{name: "l2 hit fills l1", l1: newMem(), l2: &memStore{m: map[string]*cache.Entry{"k": live}},
			want: live, wantTier: cache.TierL2, observed: []string{"l1/miss", "l2/hit"}, filled: true},
		{name: "miss both", l1: newMem(), l2: newMem(),
			observed: []string{"l1/miss", "l2/miss"}},
		{name: "dead in l1 falls to l2", l1: &memStore{m: map[string]*cache.Entry{"k": dead}},
			l2:   &memStore{m: map[string]*cache.Entry{"k": live}},
			want: live, wantTier: cache.TierL2, observed: []string{"l1/miss", "l2/hit"}, filled: true},
		{name: "dead in l2 is a miss, not copied", l1: newMem(), l2: &memStore{m: map[string]*cache.Entry{"k": dead}},
			observed: []string{"l1/miss", "l2/miss"}},
		{name: "l2 error", l1: newMem(), l2: &memStore{m: map[string]*cache.Entry{"k": live}, getErr: errBoom},
			wantErr: true, observed: []string{"l1/miss", "l2/error"}},
		{name: "stale l1 with l2 error", l1: &memStore{m: map[string]*cache.Entry{"k": stale}}, l2: &memStore{getErr: errBoom},
			want: stale, wantTier: cache.TierL1, wantErr: true, observed: []string{"l1/hit", "l2/error"}, filled: true},
		{name: "l1 error then l2 hit", l1: &memStore{m: map[string]*cache.Entry{}, getErr: errBoom},
			l2:   &memStore{m: map[string]*cache.Entry{"k": live}},
			want: live, wantTier: cache.TierL2, observed: []string{"l1/error", "l2/hit"}},
		{name: "both fail", l1: &memStore{getErr: errBoom}, l2: &memStore{getErr: errBoom},
			wantErr: true, observed: []string{"l1/error", "l2/error"}},
		{name: "l1 only hit", l1: &memStore{m: map[string]*cache.Entry{"k": live}},
			want: live, wantTier: cache.TierL1, observed: []string{"l1/hit"}, filled: true},
		{name: "l1 only miss", l1: newMem(), observed: []string{"l1/miss"}},
		{name: "l2 only hit", l2: &memStore{m: map[string]*cache.Entry{"k": live}},
			want: live, wantTier: cache.TierL2, observed: []string{"l2/hit"}},
		{name: "no tiers", observed: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var obs observations
			var s1, s2 cache.Store // untyped nil for a missing tier
			if tt.l1 != nil {
				s1 = tt.l1
			}
			if tt.l2 != nil {
				s2 = tt.l2
			}
			tiered := cache.NewTiered(s1, s2, cache.TieredOptions{Observe: obs.observe})

			e, tier, err := tiered.Lookup(ctx, "k")
			if e != tt.want || tier != tt.wantTier {
				t.Errorf("Lookup = %p, %q; want %p, %q", e, tier, tt.want, tt.wantTier)
			}
			if tt.wantErr != (err != nil) {
				t.Errorf("Lookup error = %v, want error: %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, errBoom) {
				t.Errorf("Lookup error %v does not wrap the tier's error", err)
			}
			if got := obs.take(); !slices.Equal(got, tt.observed) {
				t.Errorf("observed %q, want %q", got, tt.observed)
			}
			if tt.l1 != nil && tt.l1.getErr == nil && tt.l1.has("k") != tt.filled {
				t.Errorf("L1 holds key: %v, want %v", tt.l1.has("k"), tt.filled)
			}

			// Get is Lookup in Store's shape.
			e, ok, err := tiered.Get(ctx, "k")
			if e != tt.want || ok != (tt.want != nil) || tt.wantErr != (err != nil) {
				t.Errorf("Get = %p, %v, %v", e, ok, err)
			}
		})
	}
}

func TestTieredWithL1Stores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := newL1(t), newL1(t)
	var obs observations
	tiered := cache.NewTiered(a, b, cache.TieredOptions{Observe: obs.observe})

	// Set writes both tiers.
	e := fresh(time.Hour)
	if err := tiered.Set(ctx, "both", e); err != nil {
		t.Fatal(err)
	}
	a.Wait()
	b.Wait()
	for name, s := range map[string]*l1.Store{"l1": a, "l2": b} {
		if got, _, _ := s.Get(ctx, "both"); got != e {
			t.Errorf("%s after Set = %v", name, got)
		}
	}
	if got, tier, err := tiered.Lookup(ctx, "both"); got != e || tier != cache.TierL1 || err != nil {
		t.Errorf("Lookup = %v, %q, %v; want L1 hit", got, tier, err)
	}

	// An entry only L2 has: the first lookup hits L2, the second L1.
	e2 := fresh(time.Hour)
	if err := b.Set(ctx, "l2only", e2); err != nil {
		t.Fatal(err)
	}
	b.Wait()
	obs.take()
	if got, tier, err := tiered.Lookup(ctx, "l2only"); got != e2 || tier != cache.TierL2 || err != nil {
		t.Fatalf("first Lookup = %v, %q, %v; want L2 hit", got, tier, err)
	}
	a.Wait()
	if got, tier, _ := tiered.Lookup(ctx, "l2only"); got != e2 || tier != cache.TierL1 {
		t.Fatalf("second Lookup = %v, %q; want L1 hit", got, tier)
	}
	if got, want := obs.take(), []string{"l1/miss", "l2/hit", "l1/hit"}; !slices.Equal(got, want) {
		t.Errorf("observed %q, want %q", got, want)
	}

	// Delete drops both tiers.
	if err := tiered.Delete(ctx, "both", "l2only"); err != nil {
		t.Fatal(err)
	}
	a.Wait()
	b.Wait()
	if got, tier, err := tiered.Lookup(ctx, "both"); got != nil || tier != "" || err != nil {
		t.Fatalf("Lookup after Delete = %v, %q, %v", got, tier, err)
	}
	if a.Items() != 0 || b.Items() != 0 {
		t.Fatalf("items left after Delete: l1 %d, l2 %d", a.Items(), b.Items())
	}
}

// An L2 hit fills L1 for what is left of the entry's life, not for a whole
// TTL: L2 (a memStore) keeps the entry, and L1 must drop it.
func TestTieredFillUsesRemainingLifetime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := newL1(t), newMem()
	tiered := cache.NewTiered(a, b, cache.TieredOptions{})
	e := &cache.Entry{Status: 200, StoredAt: time.Now().Add(-time.Hour + time.Second), TTL: time.Hour}
	b.m["k"] = e
	if got, tier, _ := tiered.Lookup(ctx, "k"); got != e || tier != cache.TierL2 {
		t.Fatalf("Lookup = %v, %q; want L2 hit", got, tier)
	}
	a.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if got, _, _ := a.Get(ctx, "k"); got == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("L1 kept the copy past the entry's lifetime")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTieredClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := fresh(time.Minute)
	l2 := &memStore{m: map[string]*cache.Entry{"k": e}}
	later := func() time.Time { return e.StoredAt.Add(time.Hour) }
	tiered := cache.NewTiered(nil, l2, cache.TieredOptions{Now: later})
	if got, _, _ := tiered.Lookup(ctx, "k"); got != nil {
		t.Fatal("entry served although dead by the injected clock")
	}
}

func TestTieredWriteErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	errL1, errL2 := errors.New("l1 down"), errors.New("l2 down")
	tests := []struct {
		name     string
		e1, e2   error
		want     []error
		wantNone bool
	}{
		{name: "none", wantNone: true},
		{name: "l1 fails", e1: errL1, want: []error{errL1}},
		{name: "l2 fails", e2: errL2, want: []error{errL2}},
		{name: "both fail", e1: errL1, e2: errL2, want: []error{errL1, errL2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s1 := &memStore{m: map[string]*cache.Entry{}, setErr: tt.e1, delErr: tt.e1}
			s2 := &memStore{m: map[string]*cache.Entry{}, setErr: tt.e2, delErr: tt.e2}
			tiered := cache.NewTiered(s1, s2, cache.TieredOptions{})

			setErr := tiered.Set(ctx, "k", fresh(time.Hour))
			// A failing tier does not keep the other from being written.
			if s1.has("k") != (tt.e1 == nil) || s2.has("k") != (tt.e2 == nil) {
				t.Errorf("after Set: l1 has %v, l2 has %v", s1.has("k"), s2.has("k"))
			}
			s1.m["k"], s2.m["k"] = fresh(time.Hour), fresh(time.Hour)
			delErr := tiered.Delete(ctx, "k")
			if s1.has("k") != (tt.e1 != nil) || s2.has("k") != (tt.e2 != nil) {
				t.Errorf("after Delete: l1 has %v, l2 has %v", s1.has("k"), s2.has("k"))
			}

			// Set reports an error only when no tier accepted the entry
			// (the proxy then does not say "stored"); Delete reports every
			// failure, since a surviving copy is served.
			if accepted := tt.e1 == nil || tt.e2 == nil; accepted != (setErr == nil) {
				t.Errorf("Set error = %v, want an error only when both tiers fail", setErr)
			}
			if tt.wantNone != (delErr == nil) {
				t.Errorf("Delete error = %v", delErr)
			}
			for _, want := range tt.want {
				if !errors.Is(delErr, want) {
					t.Errorf("Delete error %v does not wrap %v", delErr, want)
				}
				if setErr != nil && !errors.Is(setErr, want) {
					t.Errorf("Set error %v does not wrap %v", setErr, want)
				}
			}
		})
	}
}

func BenchmarkTieredLookupL1Hit(b *testing.B) {
	s, err := l1.New(l1.Options{MaxBytes: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	tiered := cache.NewTiered(s, newMem(), cache.TieredOptions{Observe: func(cache.Tier, cache.Result) {}})
	_ = s.Set(ctx, "k", fresh(time.Hour))
	s.Wait()
	b.ReportAllocs()
	for b.Loop() {
		if _, tier, _ := tiered.Lookup(ctx, "k"); tier != cache.TierL1 {
			b.Fatal("not an L1 hit")
		}
	}
}

// TestPromotedBodyOwnsItsMemory: an L2 hit's body is a slice of the Redis
// reply (l2 decodes it in place), whose buffer also holds the framing, the
// encoded fields and, for a multi-key read, the siblings. The copy promoted
// into L1 must not keep that buffer alive: its body is its own, as long as
// it, whether it came by Lookup or LookupMany.
func TestPromotedBodyOwnsItsMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, many := range []bool{false, true} {
		a, b := newMem(), newMem()
		reply := make([]byte, 512) // the reply a decoded body points into
		e := fresh(time.Hour)
		e.Body = reply[100:104]
		copy(e.Body, "body")
		b.m["k"] = e
		tiered := cache.NewTiered(a, b, cache.TieredOptions{})
		var got *cache.Entry
		if many {
			es, _, err := tiered.LookupMany(ctx, []string{"k"})
			if err != nil {
				t.Fatal(err)
			}
			got = es[0]
		} else {
			var err error
			if got, _, err = tiered.Lookup(ctx, "k"); err != nil {
				t.Fatal(err)
			}
		}
		if got == nil || string(got.Body) != "body" {
			t.Fatalf("many=%v: lookup gave %+v, want the L2 entry", many, got)
		}
		kept := a.m["k"]
		if kept == nil {
			t.Fatalf("many=%v: not promoted into L1", many)
		}
		if string(kept.Body) != "body" || cap(kept.Body) != len(kept.Body) || &kept.Body[0] == &reply[100] {
			t.Fatalf("many=%v: L1 keeps a body of len %d cap %d sharing the reply: %v", many, len(kept.Body), cap(kept.Body), &kept.Body[0] == &reply[100])
		}
		if kept.Status != e.Status || !kept.StoredAt.Equal(e.StoredAt) || kept.TTL != e.TTL || len(kept.Tags) != 1 {
			t.Fatalf("many=%v: promoted %+v, want the L2 entry's fields", many, kept)
		}
	}
}
