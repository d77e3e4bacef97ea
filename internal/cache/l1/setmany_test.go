package l1

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
)

// SetMany keeps what the same Sets one after another keep: the same
// errors, entries, bytes, items and tag index, across chunks (more entries
// than setManyChunk), for a key written twice in one call, a nil entry, an
// entry larger than the store, an entry with no lifetime left (which drops
// the key's entry written earlier in the call), and keys whose hashes
// collide (the hash narrowed to 4 bits, so most of them do).
func TestSetManyAsSets(t *testing.T) {
	t.Parallel()
	for _, mask := range []uint64{^uint64(0), 0xf} {
		t.Run(fmt.Sprintf("mask %x", mask), func(t *testing.T) {
			t.Parallel()
			one := newStore(t, Options{MaxBytes: 1 << 20})
			many := newStore(t, Options{MaxBytes: 1 << 20})
			one.hashMask, many.hashMask = mask, mask
			many.seed, many.checkSeed = one.seed, one.checkSeed
			var keys []string
			var es []*cache.Entry
			add := func(key string, e *cache.Entry) {
				keys, es = append(keys, key), append(es, e)
			}
			for i := range 2*setManyChunk + 5 {
				id := fmt.Sprint(i)
				add("GET example.com/users/"+id, entry(`{"id":`+id+`}`, time.Hour, "_route:user", "user:"+id, "uri:/users/"+id))
			}
			add("GET example.com/users/3", entry(`{"id":3,"v":2}`, time.Hour, "_route:user", "user:3b"))
			add("GET example.com/users/4", nil)
			add("GET example.com/users/5", entry(strings.Repeat("x", 2<<20), time.Hour, "_route:user"))
			add("GET example.com/users/6", entry("gone", 0, "_route:user"))
			add("GET example.com/users/20", entry(`{"id":20,"v":2}`, time.Hour, "user:20"))
			add("GET example.com/clients/1", entry("c1", time.Hour, "_route:client", "user:7"))

			want := make([]error, len(keys))
			for i, key := range keys {
				want[i] = one.Set(t.Context(), key, es[i])
			}
			got := make([]error, len(keys))
			many.SetMany(t.Context(), keys, es, got, nil)
			for i := range keys {
				if (got[i] == nil) != (want[i] == nil) || errors.Is(got[i], ErrRejected) != errors.Is(want[i], ErrRejected) {
					t.Errorf("entry %d (%s): SetMany's error %v, Set's %v", i, keys[i], got[i], want[i])
				}
			}
			one.Wait()
			many.Wait()
			for _, key := range keys {
				if a, b := get(t, one, key), get(t, many, key); a != b {
					t.Errorf("%s: SetMany kept %v, Set %v", key, b, a)
				}
			}
			if one.Items() != many.Items() || one.Bytes() != many.Bytes() {
				t.Errorf("SetMany holds %d items, %d bytes; Set %d, %d", many.Items(), many.Bytes(), one.Items(), one.Bytes())
			}
			// The users and client 1, but for users 5 and 6 (user 4's nil
			// entry leaves its first one).
			if kept := int64(2*setManyChunk + 5 + 1 - 2); mask == ^uint64(0) && one.Items() != kept {
				t.Errorf("Set holds %d items, want %d", one.Items(), kept)
			}
			for _, tag := range []string{"_route:user", "_route:client", "user:3", "user:3b", "user:7", "user:20", "uri:/users/20", "uri:/users/6"} {
				a, _ := one.KeysWithTag(tag, 1000)
				b, _ := many.KeysWithTag(tag, 1000)
				if !slices.Equal(a, b) {
					t.Errorf("tag %s: SetMany's keys %q, Set's %q", tag, b, a)
				}
			}
			checkIndex(t, many)
		})
	}
}

// An invalidation racing SetMany never leaves behind an entry that keep
// would refuse: the invalidation marks first (as the proxy adds its
// tombstones) and then runs DeleteTags, and SetMany asks keep under the
// lock DeleteTags takes, so each entry is refused or written before
// DeleteTags drops it. Asked before the lock (as a caller checking its
// entries ahead of the call would), an entry checked just before the mark
// and written just after DeleteTags stays.
func TestSetManyKeepRacingInvalidation(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{MaxBytes: 64 << 20})
	const rounds, n = 2000, 2 * setManyChunk
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("GET example.com/users/%d", i)
	}
	errs := make([]error, n)
	for r := range rounds {
		tag := fmt.Sprintf("gen:%d", r)
		es := make([]*cache.Entry, n)
		for i := range es {
			es[i] = entry("v", time.Hour, "_route:user", tag)
		}
		var invalidated atomic.Bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			invalidated.Store(true)
			s.DeleteTags(tag)
		}()
		s.SetMany(t.Context(), keys, es, errs, func(*cache.Entry) bool { return !invalidated.Load() })
		<-done
		for i, key := range keys {
			if e := get(t, s, key); e == es[i] {
				t.Fatalf("round %d: %s kept after the invalidation of its tag (error %v)", r, key, errs[i])
			}
			if errs[i] != nil && !errors.Is(errs[i], cache.ErrStale) {
				t.Fatalf("round %d: %s: %v", r, key, errs[i])
			}
		}
	}
	checkIndex(t, s)
}

// SetMany charges and indexes entries that share header maps and tag
// strings (a bulk answer's, cache.Entry.SetETag) as Set does each: the
// header's size, worked out once per run of entries with the same map, is
// worked out again when the map changes (to a larger one, then back), and
// a tag's hash, taken from the previous entry's for the very same string,
// is not taken for an equal string elsewhere nor for another string of
// the same length.
func TestSetManySharedHeadersAndTags(t *testing.T) {
	t.Parallel()
	one := newStore(t, Options{MaxBytes: 1 << 20})
	many := newStore(t, Options{MaxBytes: 1 << 20})
	many.seed, many.checkSeed = one.seed, one.checkSeed
	small := http.Header{"Content-Type": {"application/json"}}
	large := http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"max-age=300"}, "Date": {"Thu, 26 Nov 2026 16:00:00 GMT"}}
	route := "_route:user"
	tags := []string{route, route, strings.Clone(route), "_route:usex", route, "_route:usex"}
	headers := []http.Header{small, small, large, large, small, nil}
	var keys []string
	var es []*cache.Entry
	for i := range tags {
		id := fmt.Sprint(i)
		e := entry(`{"id":`+id+`}`, time.Hour, tags[i], "user:"+id)
		e.Header = headers[i]
		e.SetETag([]string{`"` + id + `"`})
		keys, es = append(keys, "GET example.com/users/"+id), append(es, e)
	}
	for i, key := range keys {
		if err := one.Set(t.Context(), key, es[i]); err != nil {
			t.Fatal(err)
		}
	}
	errs := make([]error, len(keys))
	many.SetMany(t.Context(), keys, es, errs, nil)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	one.Wait()
	many.Wait()
	if one.Bytes() != many.Bytes() || one.Items() != many.Items() {
		t.Errorf("SetMany holds %d items, %d bytes; Set %d, %d", many.Items(), many.Bytes(), one.Items(), one.Bytes())
	}
	for i, key := range keys {
		if want := cost(key, es[i]); many.keys[many.hash(key)].cost != want {
			t.Errorf("%s: SetMany charged %d, want %d", key, many.keys[many.hash(key)].cost, want)
		}
	}
	for _, tag := range []string{route, "_route:usex"} {
		a, _ := one.KeysWithTag(tag, 100)
		b, _ := many.KeysWithTag(tag, 100)
		if !slices.Equal(a, b) {
			t.Errorf("tag %s: SetMany's keys %q, Set's %q", tag, b, a)
		}
	}
	checkIndex(t, many)
}
