package l1

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
)

func newStore(t testing.TB, opts Options) *Store {
	t.Helper()
	if opts.MaxBytes == 0 {
		opts.MaxBytes = 1 << 20
	}
	s, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func entry(body string, ttl time.Duration, tags ...string) *cache.Entry {
	return &cache.Entry{
		Status:   http.StatusOK,
		Header:   http.Header{"Content-Type": {"text/plain"}},
		Body:     []byte(body),
		StoredAt: time.Now(),
		TTL:      ttl,
		Tags:     tags,
	}
}

func get(t testing.TB, s *Store, key string) *cache.Entry {
	t.Helper()
	e, ok, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if ok != (e != nil) {
		t.Fatalf("Get(%q) = %v, %v: ok disagrees with entry", key, e, ok)
	}
	return e
}

func set(t testing.TB, s *Store, key string, e *cache.Entry) {
	t.Helper()
	if err := s.Set(context.Background(), key, e); err != nil {
		t.Fatalf("Set(%q): %v", key, err)
	}
}

// eventually polls cond until it holds or a deadline far beyond any
// expected delay passes: no fixed sleeps, no tight timing.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkIndex asserts the invariants between the index, the gauges and
// what Get serves: after Wait, the live items are exactly the hits.
func checkIndex(t *testing.T, s *Store) {
	t.Helper()
	s.Wait()
	s.mu.Lock()
	s.drainLocked()
	var bytes int64
	for h, it := range s.keys {
		key := it.key
		if it.dead.Load() {
			t.Errorf("index holds dead item for %q", key)
		}
		if it.h != h || s.hash(key) != h {
			t.Errorf("index slot %x holds item for %q (hash %x)", h, key, s.hash(key))
		}
		if !it.indexed {
			t.Errorf("item for %q in the index not marked indexed", key)
		}
		bytes += it.cost
		for _, tag := range it.e.Tags {
			if keys := s.keysLocked(tag); !slices.Contains(keys, key) {
				t.Errorf("key %q missing under its tag %q", key, tag)
			}
		}
	}
	for th, h := range s.tags {
		if h == nil || !h.head {
			t.Errorf("hash %x maps to %v, not the head of its list", th, h)
			continue
		}
		seen := map[string]bool{}
		for n := h; ; n = n.next {
			if n.next.prev != n || n.prev.next != n {
				t.Errorf("hash %x: list links broken", th)
				break
			}
			if n.it == nil {
				// A DeleteTags's cursor (purge.go): none is left once
				// the DeleteTags are over.
				t.Errorf("hash %x: a DeleteTags cursor left in the list", th)
				if n.next == h {
					break
				}
				continue
			}
			if n != h && n.head {
				t.Errorf("hash %x: second head at key %q", th, n.it.key)
			}
			// The node is the item's first for a tag with this hash.
			tags := n.it.e.Tags
			i := slices.IndexFunc(tags, func(tag string) bool { return s.hash(tag) == th })
			if i < 0 || &n.it.nodes[i] != n || int(n.tag) != i {
				t.Errorf("hash %x: key %q listed by a node not its first for the hash", th, n.it.key)
			}
			if s.keys[n.it.h] != n.it {
				t.Errorf("hash %x lists an item for %q that is not its key's live one", th, n.it.key)
			}
			if seen[n.it.key] {
				t.Errorf("hash %x lists key %q twice", th, n.it.key)
			}
			seen[n.it.key] = true
			if n.next == h {
				break
			}
		}
	}
	checkExpiryLocked(t, s)
	keys := make(map[string]*item, len(s.keys))
	for _, it := range s.keys {
		keys[it.key] = it
	}
	s.mu.Unlock()

	if got := s.Items(); got != int64(len(keys)) {
		t.Errorf("Items() = %d, index holds %d", got, len(keys))
	}
	if got := s.Bytes(); got != bytes {
		t.Errorf("Bytes() = %d, index holds %d", got, bytes)
	}
	for k, it := range keys {
		if e := get(t, s, k); e != it.e {
			t.Errorf("Get(%q) = %p, index holds %p", k, e, it.e)
		}
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, opts := range []Options{
		{MaxBytes: 0},
		{MaxBytes: -1},
		{MaxBytes: 1 << 20, ExpectedItems: -1},
	} {
		if s, err := New(opts); err == nil {
			s.Close()
			t.Errorf("New(%+v) succeeded", opts)
		}
	}
}

func TestSetGet(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{})
	e := entry("hello", time.Hour, "t")
	set(t, s, "k", e)
	s.Wait()

	if got := get(t, s, "k"); got != e {
		t.Fatalf("Get after Set+Wait = %v, want the stored entry", got)
	}
	if got := get(t, s, "other"); got != nil {
		t.Fatalf("Get(other) = %v, want miss", got)
	}
	if s.Items() != 1 || s.Bytes() != cost("k", e) {
		t.Fatalf("Items, Bytes = %d, %d; want 1, %d", s.Items(), s.Bytes(), cost("k", e))
	}
	if err := s.Set(context.Background(), "nil", nil); err == nil {
		t.Fatal("Set(nil entry) succeeded")
	}
	checkIndex(t, s)
}

func TestSetSkips(t *testing.T) {
	t.Parallel()
	past := time.Now().Add(-time.Hour)
	tests := []struct {
		name string
		opts Options
		e    *cache.Entry
	}{
		{"expired", Options{}, &cache.Entry{Status: 200, StoredAt: past, TTL: time.Minute}},
		{"zero lifetime", Options{}, &cache.Entry{Status: 200, StoredAt: time.Now()}},
		{"clock past lifetime", Options{Now: func() time.Time { return time.Now().Add(2 * time.Hour) }},
			entry("x", time.Hour)},
		{"larger than MaxBytes", Options{MaxBytes: 4 << 10}, entry(strings.Repeat("x", 8<<10), time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t, tt.opts)
			// A live entry first: the skipped Set must replace it.
			set(t, s, "k", entry("old", time.Hour, "old"))
			s.Wait()
			if get(t, s, "k") == nil && tt.opts.Now == nil {
				t.Fatal("live entry not stored")
			}
			tt.e.Tags = []string{"new"}
			// An entry too large for the store is refused, and says so
			// (the proxy must not report it stored); an expired one is
			// silently not kept.
			err := s.Set(context.Background(), "k", tt.e)
			if tooLarge := tt.opts.MaxBytes > 0 && tt.e.Size() > tt.opts.MaxBytes; tooLarge != errors.Is(err, ErrRejected) {
				t.Fatalf("Set = %v (entry cost %d, max %d)", err, tt.e.Size(), tt.opts.MaxBytes)
			}
			s.Wait()
			if got := get(t, s, "k"); got != nil {
				t.Fatalf("Get = %+v, want miss", got)
			}
			if s.Items() != 0 || s.Bytes() != 0 {
				t.Fatalf("Items, Bytes = %d, %d; want 0, 0", s.Items(), s.Bytes())
			}
			if n := s.DeleteTags("old", "new"); n != 0 {
				t.Fatalf("DeleteTags found %d keys, want 0", n)
			}
			checkIndex(t, s)
		})
	}
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{})
	// A long TTL but only a second of it left: L1 keeps an entry for its
	// remaining lifetime, which is what an L2 hit filling L1 relies on.
	e := entry("x", time.Hour, "t")
	e.StoredAt = time.Now().Add(-time.Hour + time.Second)
	set(t, s, "k", e)
	set(t, s, "long", entry("y", time.Hour))
	s.Wait()
	if get(t, s, "k") == nil {
		t.Fatal("miss right after Set+Wait")
	}
	eventually(t, 10*time.Second, "entry did not expire", func() bool { return get(t, s, "k") == nil })
	if get(t, s, "long") == nil {
		t.Fatal("long-lived entry expired too")
	}
	// The sweep retires it within about two seconds of its deadline.
	eventually(t, 20*time.Second, "expired entry still counted", func() bool { return s.Items() == 1 })
	checkIndex(t, s)
}

func TestByteBound(t *testing.T) {
	t.Parallel()
	const maxBytes = 64 << 10
	s := newStore(t, Options{MaxBytes: maxBytes})
	body := strings.Repeat("b", 1000)
	var sizes int64
	for i := 0; sizes < 10*maxBytes; i++ {
		e := entry(body, time.Hour, fmt.Sprintf("id:%d", i), "all")
		sizes += e.Size()
		set(t, s, fmt.Sprintf("k%d", i), e)
	}
	s.Wait()
	if b := s.Bytes(); b > maxBytes || b <= 0 {
		t.Fatalf("Bytes() = %d, want in (0, %d]", b, maxBytes)
	}
	checkIndex(t, s)
	items := s.Items()
	if n := s.DeleteTags("all"); int64(n) != items {
		t.Fatalf("DeleteTags(all) = %d, want Items() = %d", n, items)
	}
	checkIndex(t, s)
	if s.Items() != 0 {
		t.Fatalf("Items() = %d after dropping every tag", s.Items())
	}
}

func TestDeleteTags(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{})
	set(t, s, "a", entry("a", time.Hour, "t1", "t2"))
	set(t, s, "b", entry("b", time.Hour, "t1"))
	set(t, s, "c", entry("c", time.Hour, "t3"))
	s.Wait()

	if n := s.DeleteTags("t1", "nope"); n != 2 {
		t.Fatalf("DeleteTags(t1) = %d, want 2", n)
	}
	s.Wait()
	for key, want := range map[string]bool{"a": false, "b": false, "c": true} {
		if got := get(t, s, key) != nil; got != want {
			t.Errorf("Get(%q) hit = %v, want %v", key, got, want)
		}
	}
	if n := s.DeleteTags("t1", "t2"); n != 0 {
		t.Fatalf("second DeleteTags = %d, want 0", n)
	}
	checkIndex(t, s)

	// No Wait between Set and DeleteTags: the index is written first.
	set(t, s, "d", entry("d", time.Hour, "t4"))
	if n := s.DeleteTags("t4"); n != 1 {
		t.Fatalf("DeleteTags right after Set = %d, want 1", n)
	}
	s.Wait()
	if get(t, s, "d") != nil {
		t.Fatal("d served after its tag was dropped")
	}
	checkIndex(t, s)
}

func TestReSetWithNewTags(t *testing.T) {
	t.Parallel()
	for _, wait := range []bool{true, false} {
		t.Run(fmt.Sprintf("wait=%v", wait), func(t *testing.T) {
			t.Parallel()
			s := newStore(t, Options{})
			// Repeat: without a Wait, ristretto sees two new writes of one
			// key and keeps the first, which must then never be served.
			for i := range 50 {
				key := fmt.Sprintf("k%d", i)
				first := entry("first", time.Hour, "old")
				second := entry("second", time.Hour, "new")
				set(t, s, key, first)
				if wait {
					s.Wait()
				}
				set(t, s, key, second)
				s.Wait()
				got := get(t, s, key)
				if got == first {
					t.Fatalf("%s: served the replaced entry", key)
				}
				if wait && got != second {
					t.Fatalf("%s: Get = %v, want the second entry", key, got)
				}
				if n := s.DeleteTags("old"); n != 0 {
					t.Fatalf("%s: DeleteTags(old) = %d, want 0", key, n)
				}
				checkIndex(t, s)
				if n := s.DeleteTags("new"); got != nil && n != 1 {
					t.Fatalf("%s: DeleteTags(new) = %d, want 1", key, n)
				}
				s.Wait()
				if get(t, s, key) != nil {
					t.Fatalf("%s: served after DeleteTags(new)", key)
				}
			}
			checkIndex(t, s)
		})
	}
}

// A callback for a replaced value, arriving after the newer Set, must not
// unindex or uncount the newer value.
func TestLateCallbackKeepsNewerItem(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{})
	set(t, s, "k", entry("1", time.Hour, "old"))
	s.Wait()
	s.mu.Lock()
	old := s.keys[s.hash("k")]
	s.mu.Unlock()
	e := entry("2", time.Hour, "new")
	set(t, s, "k", e)
	s.Wait()

	s.gone(old)
	s.gone(nil)
	checkIndex(t, s)
	if s.Items() != 1 {
		t.Fatalf("Items() = %d, want 1", s.Items())
	}
	if get(t, s, "k") != e {
		t.Fatal("newer entry lost")
	}
	if n := s.DeleteTags("new"); n != 1 {
		t.Fatalf("DeleteTags(new) = %d, want 1", n)
	}
}

func TestDelete(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{})
	set(t, s, "a", entry("a", time.Hour, "t"))
	set(t, s, "b", entry("b", time.Hour, "t"))
	set(t, s, "c", entry("c", time.Hour))
	s.Wait()
	if err := s.Delete(context.Background(), "a", "b", "absent"); err != nil {
		t.Fatal(err)
	}
	s.Wait()
	if get(t, s, "a") != nil || get(t, s, "b") != nil || get(t, s, "c") == nil {
		t.Fatal("Delete dropped the wrong keys")
	}
	if n := s.DeleteTags("t"); n != 0 {
		t.Fatalf("deleted keys still under their tag: %d", n)
	}
	checkIndex(t, s)
}

func TestClear(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{})
	for i := range 100 {
		set(t, s, fmt.Sprint(i), entry("x", time.Hour, "t"))
	}
	s.Wait()
	s.Clear()
	if s.Items() != 0 || s.Bytes() != 0 {
		t.Fatalf("Items, Bytes = %d, %d after Clear", s.Items(), s.Bytes())
	}
	for i := range 100 {
		if get(t, s, fmt.Sprint(i)) != nil {
			t.Fatalf("key %d served after Clear", i)
		}
	}
	if n := s.DeleteTags("t"); n != 0 {
		t.Fatalf("DeleteTags after Clear = %d", n)
	}
	set(t, s, "after", entry("x", time.Hour))
	s.Wait()
	if get(t, s, "after") == nil {
		t.Fatal("Set after Clear not visible")
	}
	checkIndex(t, s)
}

func TestClosed(t *testing.T) {
	s, err := New(Options{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	set(t, s, "k", entry("x", time.Hour))
	s.Wait()
	s.Close()
	s.Close()
	if err := s.Set(context.Background(), "k2", entry("x", time.Hour)); !errors.Is(err, ErrRejected) {
		t.Fatalf("Set after Close = %v, want ErrRejected", err)
	}
	s.Wait()
	if get(t, s, "k") != nil || get(t, s, "k2") != nil {
		t.Fatal("closed store served an entry")
	}
	if s.Items() != 0 || s.Bytes() != 0 {
		t.Fatalf("Items, Bytes = %d, %d after Close", s.Items(), s.Bytes())
	}
}

func TestConcurrent(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{MaxBytes: 32 << 10})
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 3000 {
				key := fmt.Sprintf("k%d", r.IntN(64))
				tag := fmt.Sprintf("t%d", r.IntN(8))
				switch n := r.IntN(100); {
				case n < 50:
					if e, ok, _ := s.Get(ctx, key); ok && e.Status != http.StatusOK {
						t.Errorf("bad entry %+v", e)
					}
				case n < 85:
					_ = s.Set(ctx, key, entry(strings.Repeat("x", r.IntN(2000)), time.Hour, tag))
				case n < 93:
					_ = s.Delete(ctx, key)
				case n < 99:
					s.DeleteTags(tag)
				default:
					s.Clear()
				}
				_, _ = s.Bytes(), s.Items()
			}
		})
	}
	wg.Wait()
	checkIndex(t, s)
}

func BenchmarkGet(b *testing.B) {
	s := newStore(b, Options{MaxBytes: 64 << 20})
	ctx := context.Background()
	set(b, s, "GET example.com/clients/42", entry(strings.Repeat("x", 2048), time.Hour, "client:42"))
	s.Wait()
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, _ := s.Get(ctx, "GET example.com/clients/42"); !ok {
			b.Fatal("miss")
		}
	}
}

func BenchmarkGetParallel(b *testing.B) {
	s := newStore(b, Options{MaxBytes: 64 << 20})
	ctx := context.Background()
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("GET example.com/clients/%d", i)
		set(b, s, keys[i], entry(strings.Repeat("x", 2048), time.Hour))
	}
	s.Wait()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, ok, _ := s.Get(ctx, keys[i%len(keys)]); !ok {
				b.Fatal("miss")
			}
			i++
		}
	})
}

func BenchmarkSet(b *testing.B) {
	s := newStore(b, Options{MaxBytes: 64 << 20})
	ctx := context.Background()
	e := entry(strings.Repeat("x", 2048), time.Hour, "client:42")
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = fmt.Sprintf("GET example.com/clients/%d", i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_ = s.Set(ctx, keys[i%len(keys)], e)
		i++
	}
}

// A key rewritten while it is read is never missing: a Set kills the
// key's old value before ristretto swaps in the new one, and a Get that
// found the dead value in ristretto once answered a miss (an extra trip
// upstream for a key the cache held all along). The one miss allowed is
// Set's documented one: ristretto drops a write when its buffer is full
// (a loaded machine, other tests' stores beside it), Set returns
// ErrRejected, and the key is absent until the next Set. A miss counts
// against the store only when no Set that could have been the key's
// latest around the Get was dropped.
func TestGetDuringReplace(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{})
	set(t, s, "k", entry("v0", time.Hour))
	s.Wait()
	const writes = 20000
	var (
		started, finished atomic.Int64 // Sets begun, Sets returned
		dropped           [writes]atomic.Bool
		drops             atomic.Int64
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range writes {
			started.Store(int64(i + 1))
			if err := s.Set(context.Background(), "k", entry(fmt.Sprint(i), time.Hour)); errors.Is(err, ErrRejected) {
				dropped[i].Store(true)
				drops.Add(1)
			}
			finished.Store(int64(i + 1))
		}
	}()
	misses, excused, gets := 0, 0, 0
	for running := true; running; gets++ {
		select {
		case <-done:
			running = false
		case <-t.Context().Done():
			t.Fatal("test ended before the writer")
		default:
		}
		before := started.Load()
		if get(t, s, "k") != nil {
			continue
		}
		after := started.Load()
		// Wait for every Set begun by the Get's end to return, then ask
		// whether one that may have been the latest at the Get was dropped:
		// the last begun before it (it may have returned already) or any
		// begun during it.
		for finished.Load() < after {
			runtime.Gosched()
		}
		excuse := false
		for i := max(before-1, 1); i <= after; i++ {
			excuse = excuse || dropped[i-1].Load()
		}
		if excuse {
			excused++
			continue
		}
		misses++
	}
	if misses > 0 {
		t.Fatalf("%d of %d Gets missed a key rewritten all along (%d more right after one of the %d Sets ristretto dropped)", misses, gets, excused, drops.Load())
	}
	t.Logf("%d Gets, %d misses right after one of the %d Sets ristretto dropped", gets, excused, drops.Load())
}
