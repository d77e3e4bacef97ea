package fit_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/fit"
	"github.com/sidecache/sidecache/internal/httpcache"
)

// TestEnough: what each need takes, in route mode (no directives) and
// under a request's directives.
func TestEnough(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const s = time.Second
	// An entry 30 s old: fresh for 60 s, 20 s of stale-while-revalidate,
	// 40 s of stale-if-error.
	at := func(age time.Duration) *cache.Entry {
		return &cache.Entry{StoredAt: now.Add(-age), TTL: 60 * s, StaleWhileRevalidate: 20 * s, StaleIfError: 40 * s}
	}
	dirs := func(cc string, refresh bool) *httpcache.Directives {
		d := fit.Directives(http.Header{"Cache-Control": {cc}}, refresh)
		return &d
	}
	cases := []struct {
		name string
		age  time.Duration
		n    fit.Need
		d    *httpcache.Directives
		want bool
	}{
		{"fresh", 30 * s, fit.Fresh, nil, true},
		{"stale, need fresh", 70 * s, fit.Fresh, nil, false},
		{"stale within swr", 70 * s, fit.Revalidate, nil, true},
		{"stale past swr", 90 * s, fit.Revalidate, nil, false},
		{"stale within sie", 90 * s, fit.IfError, nil, true},
		{"stale past sie", 110 * s, fit.IfError, nil, false},
		{"any", 1000 * s, fit.Any, nil, true},
		{"max-age bounds the age", 30 * s, fit.Fresh, dirs("max-age=10", true), false},
		{"max-age within: fresh", 30 * s, fit.Fresh, dirs("max-age=100", true), true},
		{"max-age: no stale while revalidating", 70 * s, fit.Revalidate, dirs("max-age=100", true), false},
		{"min-fresh: no stale while revalidating", 70 * s, fit.Revalidate, dirs("min-fresh=1", true), false},
		{"max-stale takes a stale copy", 70 * s, fit.Fresh, dirs("max-stale=15", true), true},
		{"max-age=0 ignored without refresh", 30 * s, fit.Fresh, dirs("max-age=0", false), true},
		{"max-age=0 with refresh", 30 * s, fit.Fresh, dirs("max-age=0", true), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := fit.Enough(at(tc.age), tc.n, tc.d, now); got != tc.want {
				t.Errorf("Enough = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestMaxStaleKeepsMustRevalidate: a max-stale never lifts the entry's
// own must-revalidate (RFC 9111 §5.2.2.2).
func TestMaxStaleKeepsMustRevalidate(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e := &cache.Entry{StoredAt: now.Add(-70 * time.Second), TTL: time.Minute, NoStale: true}
	d := fit.Directives(http.Header{"Cache-Control": {"max-stale=60"}}, true)
	if fit.Enough(e, fit.Fresh, &d, now) {
		t.Error("a max-stale request took a must-revalidate entry stale")
	}
}
