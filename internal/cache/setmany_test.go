package cache_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
)

// Tiered.SetMany reports for each entry what Set reports, and writes the
// tiers Set writes: through l1's SetMany (an entry larger than the store
// is refused there, and an error only when no other tier took it), through
// a plain Store's Set, and with either tier failing or absent.
func TestTieredSetManyAsSet(t *testing.T) {
	t.Parallel()
	errL1, errL2 := errors.New("l1 down"), errors.New("l2 down")
	big := fresh(time.Hour)
	big.Body = []byte(strings.Repeat("x", 2<<20))
	keys := []string{"a", "big", "b"}
	es := []*cache.Entry{fresh(time.Hour), big, fresh(time.Hour)}
	tests := []struct {
		name   string
		l1, l2 func() cache.Store
	}{
		{name: "l1 only", l1: func() cache.Store { return newL1(t) }},
		{name: "l1 and l2", l1: func() cache.Store { return newL1(t) }, l2: func() cache.Store { return newMem() }},
		{name: "l1, l2 fails", l1: func() cache.Store { return newL1(t) }, l2: func() cache.Store { return &memStore{m: map[string]*cache.Entry{}, setErr: errL2} }},
		{name: "plain l1 fails", l1: func() cache.Store { return &memStore{m: map[string]*cache.Entry{}, setErr: errL1} }, l2: func() cache.Store { return newMem() }},
		{name: "both plain fail", l1: func() cache.Store { return &memStore{m: map[string]*cache.Entry{}, setErr: errL1} }, l2: func() cache.Store { return &memStore{m: map[string]*cache.Entry{}, setErr: errL2} }},
		{name: "l2 only", l2: func() cache.Store { return newMem() }},
		{name: "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tier := func() *cache.Tiered {
				var s1, s2 cache.Store
				if tt.l1 != nil {
					s1 = tt.l1()
				}
				if tt.l2 != nil {
					s2 = tt.l2()
				}
				return cache.NewTiered(s1, s2, cache.TieredOptions{})
			}
			one, many := tier(), tier()
			got := make([]error, len(keys)+1) // longer than keys: only its head is written
			got[len(keys)] = errL1
			many.SetMany(t.Context(), keys, es, got, nil)
			if got[len(keys)] != errL1 {
				t.Errorf("SetMany wrote errs past len(keys)")
			}
			for i, key := range keys {
				want := one.Set(t.Context(), key, es[i])
				if (got[i] == nil) != (want == nil) {
					t.Errorf("%s: SetMany's error %v, Set's %v", key, got[i], want)
				}
				for _, e := range []error{errL1, errL2, l1.ErrRejected} {
					if errors.Is(got[i], e) != errors.Is(want, e) {
						t.Errorf("%s: SetMany's error %v, Set's %v: not alike for %v", key, got[i], want, e)
					}
				}
			}
			for _, key := range keys {
				a, _, _ := one.Lookup(t.Context(), key)
				b, _, _ := many.Lookup(t.Context(), key)
				if (a == nil) != (b == nil) {
					t.Errorf("%s: after SetMany found %v, after Set %v", key, b != nil, a != nil)
				}
			}
		})
	}
}

// An entry SetMany's keep refuses is written to no tier and reported as
// ErrStale, with an L1 (which asks keep) or without (Tiered asks it
// before the L2 write); the others are written as Set writes them.
func TestTieredSetManyKeep(t *testing.T) {
	t.Parallel()
	for _, withL1 := range []string{"l1", "plain", ""} { // l1.Store's SetMany, SetEach over a plain store's Set, none
		var s1 cache.Store
		switch withL1 {
		case "l1":
			s1 = newL1(t)
		case "plain":
			s1 = newMem()
		}
		s2 := newMem()
		tiered := cache.NewTiered(s1, s2, cache.TieredOptions{})
		stale := fresh(time.Hour)
		keys := []string{"a", "stale", "b"}
		errs := make([]error, len(keys))
		tiered.SetMany(t.Context(), keys, []*cache.Entry{fresh(time.Hour), stale, fresh(time.Hour)}, errs,
			func(e *cache.Entry) bool { return e != stale })
		for i, key := range keys {
			if want := key == "stale"; errors.Is(errs[i], cache.ErrStale) != want || (errs[i] != nil) != want {
				t.Errorf("l1 %q: %s: error %v", withL1, key, errs[i])
			}
			found, _, _ := tiered.Lookup(t.Context(), key)
			if (found != nil) == (key == "stale") || s2.has(key) == (key == "stale") {
				t.Errorf("l1 %q: %s: found %v, in l2 %v", withL1, key, found != nil, s2.has(key))
			}
		}
	}
}
