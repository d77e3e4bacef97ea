package proxy_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/cache/l2"
	"github.com/sidecache/sidecache/internal/redistest"
	"github.com/sidecache/sidecache/internal/route"
)

// Ids that stacks read as different integers, or that only some read as
// one (internal/spelling.AppendInts): "0x5" is 5 to PostgreSQL 16+ and
// JavaScript, 0 to Ruby and MySQL; "0_5" and "1_000" are 5 and 1000 to
// PostgreSQL, Python and Ruby, 0 and 1 to parseInt; a full-width "５" is
// 5 to Python's int() and Java; NBSP, U+FEFF and U+3000 around an id are
// skipped by Python or JavaScript. A write through any of them drops
// every reading's entries; a read through any of them is not stored.

// pgInt reads an id as PostgreSQL 16+'s int8 input and Python's int()
// do: Unicode blanks around it, Unicode decimal digits, a 0x, 0o or 0b
// prefix, underscores between digits; anything else as leadingInt (a
// to_param slug).
func pgInt(s string) (int, error) {
	t := strings.TrimFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == 0xfeff })
	t = strings.Map(func(r rune) rune {
		if r >= 0xff10 && r <= 0xff19 {
			return '0' + r - 0xff10
		}
		return r
	}, t)
	u := strings.TrimLeft(t, "+-")
	base := 10
	if len(u) > 1 && u[0] == '0' && strings.ContainsRune("xXoObB", rune(u[1])) {
		base = 0 // Go's base 0 reads the prefix
	}
	if n, err := strconv.ParseInt(t, base, 64); err == nil {
		return int(n), nil
	}
	if !strings.Contains(t, "__") && !strings.HasSuffix(t, "_") {
		if n, err := strconv.ParseInt(strings.ReplaceAll(t, "_", ""), base, 64); err == nil {
			return int(n), nil
		}
	}
	return leadingInt(s)
}

// withRedis stores in a real Redis behind L1, and invalidates both.
func withRedis(t *testing.T) envOpt {
	srv := redistest.Start(t)
	st, err := l2.New(context.Background(), l2.Options{Addrs: []string{srv.Addr()}, Prefix: "sm:", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return func(o *proxyOptions, s *l1.Store) {
		o.Cache = cache.NewTiered(s, st, cache.TieredOptions{})
		o.Invalidator = invalidatorFunc(func(ctx context.Context, tags ...string) error {
			s.DeleteTags(tags...)
			return st.InvalidateTags(ctx, tags...)
		})
	}
}

// A write spelled a way the origin reads as client n drops what /clients/n
// and the routes tagged client:n stored, in L1 and in Redis, whether the
// write route constrains its id or not. Before, spelling.Int read 0x5 as
// 0 alone, and "５", "\u00a05" as no integer: the write invalidated
// client:0 or nothing, and /clients/5 stayed stale for its ttl.
func TestMultiReadingWriteInvalidates(t *testing.T) {
	for _, pattern := range []string{"/clients/{id:[1-9][0-9]*}", "/clients/{id}"} {
		for _, tc := range []struct{ spelled, id string }{
			{"/clients/0x5", "5"}, {"/clients/0X5", "5"}, {"/clients/0o5", "5"}, {"/clients/0b101", "5"},
			{"/clients/0_5", "5"}, {"/clients/1_000", "1000"},
			{"/clients/%EF%BC%95", "5"}, {"/clients/%C2%A05", "5"}, {"/clients/%EF%BB%BF5", "5"}, {"/clients/%E3%80%805%E3%80%80", "5"},
		} {
			t.Run(pattern+tc.spelled, func(t *testing.T) {
				o := newOriginReading(t, pgInt)
				write := testRoute{Name: "client-write", Methods: []string{"PATCH"}, Pattern: pattern, Invalidate: []string{"client:{id}"}}
				read := clientRoute
				read.Pattern = pattern
				summary := testRoute{Name: "summary", Pattern: pattern + "/summary", TTL: time.Minute, Tags: []string{"client:{id}"}}
				e := newEnv(t, o.upstream, []testRoute{summary, read, write}, withRedis(t))
				paths := []string{"/clients/" + tc.id, "/clients/" + tc.id + "/summary"}
				for _, p := range paths {
					e.get(p)
					if r, b := e.get(p); b != "old" || !strings.Contains(r.Header.Get("Cache-Status"), "hit") {
						t.Fatalf("second read of %s: %q (%s), want a stored old", p, b, r.Header.Get("Cache-Status"))
					}
				}
				if code := patch(t, e, tc.spelled, "new"); code != http.StatusNoContent {
					t.Fatalf("PATCH %s: %d", tc.spelled, code)
				}
				for _, p := range paths {
					if r, b := e.get(p); b != "new" {
						t.Errorf("%s after PATCH %s = %q (%s), want new", p, tc.spelled, b, r.Header.Get("Cache-Status"))
					}
				}
			})
		}
	}
}

// The storage side: a read whose id several stacks read differently, or
// one only Python or JavaScript reads as a number, passes through
// uncached (strict for storage), so a write to the canonical spelling of
// what the origin read leaves no stale copy under it. Before, "0x5" was
// stored as a slug of 0, and "５" as a resource of its own.
func TestMultiReadingReadNotStored(t *testing.T) {
	for _, path := range []string{"/clients/0x5", "/clients/0b101", "/clients/0_5", "/clients/%EF%BC%95", "/clients/%C2%A05",
		"/clients/0x5/summary", "/clients/%EF%BC%95/summary"} {
		t.Run(path, func(t *testing.T) {
			o := newOriginReading(t, pgInt)
			write := testRoute{Name: "client-write", Methods: []string{"PATCH"}, Pattern: "/clients/{id}", Invalidate: []string{"client:{id}"}}
			summary := testRoute{Name: "summary", Pattern: "/clients/{id}/summary", TTL: time.Minute, Tags: []string{"client:{id}"}}
			e := newEnv(t, o.upstream, []testRoute{summary, clientRoute, write}, withRedis(t))
			e.get(path)
			if r, _ := e.get(path); strings.Contains(r.Header.Get("Cache-Status"), "hit") {
				t.Errorf("second GET %s: %s, want not stored", path, r.Header.Get("Cache-Status"))
			}
			if code := patch(t, e, "/clients/5", "new"); code != http.StatusNoContent {
				t.Fatalf("PATCH: %d", code)
			}
			if r, b := e.get(path); b != "new" {
				t.Errorf("GET %s after PATCH /clients/5 = %q (%s), want new", path, b, r.Header.Get("Cache-Status"))
			}
		})
	}
}

// Batch and split ids: an id several stacks read differently is neither
// batched nor split under one reading. Its per-id read passes through,
// and a list holding it passes through whole (detail=split-spelling), the
// upstream's own answer, so a write to /users/5 is seen at once.
func TestMultiReadingListIDs(t *testing.T) {
	for _, ask := range []string{"/users/0x5", "/users?ids=0x5,7", "/users?ids=7,0b101", "/users?ids=%EF%BC%95,7", "/users?ids=0_5"} {
		t.Run(ask, func(t *testing.T) {
			o := newOriginReading(t, pgInt)
			user := testRoute{Name: "user", Pattern: "/users/{id}", TTL: time.Minute, Tags: []string{"user:{id}"},
				Batch: &route.Batch{Path: "/users", Param: "ids", IDField: "id", MaxSize: 10, MaxWait: time.Millisecond}}
			list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
			write := testRoute{Name: "user-write", Methods: []string{"PATCH"}, Pattern: "/users/{id}", Invalidate: []string{"user:{id}"}}
			e := newEnv(t, o.upstream, []testRoute{user, list, write}, withRedis(t))
			if r, b := e.get(ask); !strings.Contains(b, "old") || r.StatusCode != 200 {
				t.Fatalf("first GET %s: %d %q", ask, r.StatusCode, b)
			}
			if r, _ := e.get(ask); strings.Contains(r.Header.Get("Cache-Status"), "hit") {
				t.Errorf("second GET %s: %s, want not stored", ask, r.Header.Get("Cache-Status"))
			}
			if code := patch(t, e, "/users/5", "new"); code != http.StatusNoContent {
				t.Fatalf("PATCH: %d", code)
			}
			if r, b := e.get(ask); !strings.Contains(b, "new") {
				t.Errorf("GET %s after PATCH /users/5 = %q (%s), want user 5 new", ask, b, r.Header.Get("Cache-Status"))
			}
		})
	}
}

// A write whose path reads as more combinations of ids than
// spelling.MaxFolds is refused unsent: its invalidation cannot be listed
// within the bound.
func TestTooManySpellingsRefused(t *testing.T) {
	o := newOriginReading(t, pgInt)
	write := testRoute{Name: "deep-write", Methods: []string{"PATCH"}, Pattern: "/d/*", Invalidate: []string{"deep"}}
	e := newEnv(t, o.upstream, []testRoute{write}, withL1Invalidator)
	calls := o.calls.Load()
	path := "/d" + strings.Repeat("/0x1", 7)
	if code := patch(t, e, path, "new"); code != http.StatusBadRequest {
		t.Errorf("PATCH %s: %d, want 400", path, code)
	}
	if got := o.calls.Load() - calls; got != 0 {
		t.Errorf("the origin got %d calls, want none", got)
	}
	if code := patch(t, e, "/d"+strings.Repeat("/0x1", 6), "new"); code != http.StatusNoContent {
		t.Errorf("six ids, 64 readings: %d, want 204", code)
	}
}
