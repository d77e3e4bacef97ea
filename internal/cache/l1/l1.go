// Package l1 is the in-process cache tier: a ristretto cache bounded by the
// bytes its entries hold, with a tag → keys index so that invalidating a tag
// is local and costs only the keys under it.
//
// Ristretto applies writes asynchronously and reports what leaves it through
// callbacks that may arrive late, out of order with newer writes, or (for a
// key written twice before the first write is applied) for a value other
// than the one it keeps. So the index, not ristretto, decides what is live:
// every stored value is wrapped in an item that dies exactly once, Get never
// serves a dead item, and an item is live only while the index holds it.
// Whatever race ristretto loses, a tag invalidation therefore never leaves a
// servable entry behind.
//
// For the same reason the index, not ristretto, expires entries (expiry.go):
// ristretto stores them without a TTL, Get checks what is left of the
// entry's lifetime itself, and a sweep retires the expired ones, so their
// memory comes back without ristretto's per-write expiration bookkeeping.
package l1

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/sidecache/sidecache/internal/cache"
)

// Options configures a Store.
type Options struct {
	// MaxBytes bounds the sum of Entry.Size over the entries kept.
	MaxBytes int64
	// ExpectedItems sizes ristretto's admission counters (ten per item).
	// 0 derives it from MaxBytes assuming entries of about 2 KiB.
	ExpectedItems int64
	// Now is the clock entry lifetimes are measured against; nil is time.Now.
	// The expiry sweep calls it from its own goroutine: it must be safe
	// for concurrent use.
	Now func() time.Time
}

const (
	assumedEntryBytes = 2 << 10
	// The derived item count is clamped: too few counters make admission
	// blind, too many cost memory (about 3 bytes per counter) for nothing.
	minExpectedItems = 1 << 10
	maxExpectedItems = 1 << 21
)

// Store is an in-process cache.Store. It never returns an error from Get,
// Set or Delete; the signatures are the interface's.
type Store struct {
	// c holds the items under their keys' hashes (hash), not the keys:
	// ristretto then hashes nothing (a string key costs it two hashes per
	// call, memhash and xxhash, where this package has hashed the key
	// already), and a Del names an item by what the item holds, without
	// reading its key's bytes back. It keeps one item per hash, as keys
	// does (see mu), and Get checks the key's second hash (check).
	c        *ristretto.Cache[uint64, *item]
	now      func() time.Time
	maxBytes int64
	// base is s.now() when the store was made: deadlines are counted from
	// it (since). realClock is whether now is time.Now, whose monotonic
	// reading since can take alone (time.Since): one clock read on a hit
	// where time.Now takes two (the wall clock's and the monotonic one's).
	base      time.Time
	realClock bool

	// bytes and items count the live items, for the sidecache_l1_bytes and
	// sidecache_l1_items gauges (ristretto's own metrics are off: they cost
	// on every Get).
	bytes atomic.Int64
	items atomic.Int64

	// mu guards the index and is held across every ristretto call that
	// writes, so index and cache change in the same order. Ristretto's
	// callbacks run on its own goroutine and never wait for mu (they would
	// deadlock against a Del blocked on ristretto's full write buffer); they
	// leave dead items in grave for the next holder of mu to unindex.
	//
	// Both maps are keyed by a 64-bit hash of the string (hash), computed
	// once per Set and per tag, not by the string: a growing map rehashes
	// a uint64 without reading the string's bytes back, and a lookup then
	// an insert hash once. keys holds one live item per hash (a Set
	// retires a live item of another key with the same hash, as a cache
	// may drop any entry); tags lists, per hash, the items carrying a tag
	// with that hash, and its walks keep those that carry the tag asked.
	mu       sync.Mutex
	keys     map[uint64]*item
	tags     map[uint64]*tagNode // the head of the hash's list (taglist.go)
	seed     maphash.Seed
	hashMask uint64 // all ones; tests narrow it to force collisions
	// checkSeed seeds check, a hash independent of hash's.
	checkSeed maphash.Seed

	graveMu sync.Mutex
	grave   []*item
	// graveAny is whether grave may hold items, so that drainLocked, which
	// every write calls, takes graveMu only then.
	graveAny atomic.Bool

	// expiry lists, per bucket of deadlines, the indexed items (expiry.go).
	// sweep is the timer that retires them once expired, armed while
	// expiry holds any; closed stops it for good. All guarded by mu.
	// resets counts the Clears and the Close, which drop the tag lists
	// whole: a DeleteTags resuming its walk checks it (purge.go).
	resets uint64
	// heldMost is the most entries one DeleteTags visited in one hold of
	// mu, the bound purgeChunk sets, read by tests.
	heldMost int

	expiry     map[int64]*item
	swept      int64 // the first bucket the sweep has not emptied
	sweepTimer *time.Timer
	sweepArmed bool
	closed     bool
}

// cost is what keeping e under key charges against MaxBytes: the entry and
// its key, plus this store's own per-item bookkeeping (the item, its slot
// in keys, ristretto's stored item and policy slot) and what each of its
// tags holds in the index. Leaving any of it out lets a flood of distinct
// keys with small answers hold many times MaxBytes.
func cost(key string, e *cache.Entry) int64 {
	return costWith(key, e, cache.HeaderSize(e.Header))
}

// costWith is cost for hs = cache.HeaderSize(e.Header).
func costWith(key string, e *cache.Entry, hs int64) int64 {
	return e.KeyedSizeWith(key, hs) + itemOverhead + int64(len(e.Tags))*tagSlotOverhead
}

// tagSlotOverhead is a tag's node in the item (40 B, its tag's hash
// included) plus, for a tag that names only this entry (an id's, a URI's),
// its slot in the tags map (a hash and a pointer, 16 B, at a load that
// falls to 7/16 right after the map's tables split). It was 48, which the heap test's batched-miss shape
// (two such tags) outgrew when the index was keyed by strings.
const (
	itemOverhead    = 384
	tagSlotOverhead = 80
)

// item is what ristretto stores: the entry plus what the index needs to
// recognise it when a callback hands it back.
type item struct {
	// What a hit reads, first and together: the item's cache line is cold
	// when the hits spread over many keys.
	e    *cache.Entry
	dead atomic.Bool
	// indexed is whether keys maps key to this item, guarded by mu: a late
	// callback for a replaced value then finds it unindexed without a
	// lookup in keys. (Next to dead, in the word dead pads.)
	indexed bool
	// deadline is when the entry's lifetime ends, in Store.since's time.
	deadline int64
	// chk is s.check(key): ristretto finds an item by its key's hash
	// alone, and Get tells a key from another of the same hash by this
	// second, independent one, read from the line Get reads anyway (the
	// key's bytes are elsewhere, cold when hits spread over many keys).
	chk uint64

	key   string
	cost  int64
	h     uint64    // s.hash(key), the item's key in keys and in c
	nodes []tagNode // one per e.Tags, in its order
	// expNext and expPrev link it in its deadline's bucket's list
	// (expiry.go) while it is indexed, guarded by mu.
	expNext, expPrev *item
}

// New returns an empty Store; Close releases its goroutines.
func New(opts Options) (*Store, error) {
	if opts.MaxBytes <= 0 {
		return nil, fmt.Errorf("l1: max bytes must be positive, got %d", opts.MaxBytes)
	}
	if opts.ExpectedItems < 0 {
		return nil, fmt.Errorf("l1: expected items must not be negative, got %d", opts.ExpectedItems)
	}
	expected := opts.ExpectedItems
	if expected == 0 {
		expected = min(max(opts.MaxBytes/assumedEntryBytes, minExpectedItems), maxExpectedItems)
	}
	// The index maps are made at the size they reach when the expected
	// items fill the store: a filling store would otherwise grow them all
	// along, each growth rewriting every slot of a table long gone cold
	// (the batched miss's write measured 3.7 µs with growth, 2.9 without).
	// Seven eighths of expected: Go sizes a map for a hint at 8/7 of it
	// rounded up to a power of two, so that is one table slot per expected
	// item. It costs up front what they would hold full, about 2.2 MiB
	// each per 128Ki expected items (MaxBytes 256 MiB), a store of larger
	// entries never holding that many.
	hint := int(expected - expected/8)
	s := &Store{
		now:       opts.Now,
		maxBytes:  opts.MaxBytes,
		keys:      make(map[uint64]*item, hint),
		tags:      make(map[uint64]*tagNode, hint),
		expiry:    make(map[int64]*item),
		seed:      maphash.MakeSeed(),
		hashMask:  ^uint64(0),
		checkSeed: maphash.MakeSeed(),
	}
	if s.now == nil {
		s.now, s.realClock = time.Now, true
	}
	s.base = s.now()
	gone := func(i *ristretto.Item[*item]) { s.gone(i.Value) }
	c, err := ristretto.NewCache(&ristretto.Config[uint64, *item]{
		NumCounters:        10 * expected,
		MaxCost:            opts.MaxBytes,
		BufferItems:        64,
		IgnoreInternalCost: true,
		// OnEvict covers policy evictions and Clear; OnReject
		// covers admission refusals. OnExit is left unset on purpose: it
		// also fires synchronously inside Set and Del, for values this
		// package has already retired itself.
		OnEvict:  gone,
		OnReject: gone,
	})
	if err != nil {
		return nil, fmt.Errorf("l1: %w", err)
	}
	s.c = c
	return s, nil
}

// Get returns the stored entry itself, not a copy, so a hit costs no
// allocation. Entries are immutable once stored: callers must not modify
// the entry or anything it points to (Header, Body, Tags).
func (s *Store) Get(_ context.Context, key string) (*cache.Entry, bool, error) {
	h := s.hash(key)
	it, ok := s.c.Get(h)
	if !ok || it.dead.Load() || it.chk != s.check(key) {
		// Ristretto applies a Set asynchronously. Until it does, the index
		// already holds the item: serving it from there closes the window
		// in which a key just filled by a coalesced fetch looks absent and
		// the next burst of requests goes upstream again. So does a Set
		// that replaces a key: it kills the old value before ristretto
		// swaps in the new one. Only misses pay for the lock. The item is
		// checked under it, where the index holds no value a Set replaced.
		// (A live item of another key with the same hash is told apart by
		// chk above and by its key here.)
		s.mu.Lock()
		it = s.keys[h]
		live := it != nil && it.key == key && !it.dead.Load()
		s.mu.Unlock()
		if !live {
			return nil, false, nil
		}
	}
	// Ristretto keeps items past their lifetime, until the sweep. The
	// deadline is the entry's Remaining as Set saw it, read from the item
	// Get has in hand rather than from the entry.
	if s.since() >= it.deadline {
		return nil, false, nil
	}
	return it.e, true, nil
}

// ErrRejected is returned by Set for an entry the store will not hold
// (larger than the whole store, or dropped by ristretto), so a caller does
// not report it as stored.
var ErrRejected = errors.New("l1: entry rejected")

// Set keeps e for its remaining lifetime, e.Remaining(now). The write
// becomes visible asynchronously (see Wait), and ristretto's admission
// policy may refuse it once the cache is full; either is fine for a cache.
// An entry with no lifetime left, or larger than MaxBytes, is not kept, and
// the key's previous entry is dropped, since e replaces it either way.
// e must not be modified after Set.
func (s *Store) Set(ctx context.Context, key string, e *cache.Entry) error {
	return s.SetKeep(ctx, key, e, nil)
}

// SetKeep is Set with keep, if not nil, asked under mu right before e is
// written, as SetMany asks it of each entry: false refuses e (the key's
// entry, if any, stays), with cache.ErrStale. An invalidation adds its
// tombstones before it takes mu for DeleteTags, so an entry requested
// before it is either refused here or written before DeleteTags runs,
// which then drops it: never written after DeleteTags passed, to be
// served once the tombstones lapse (cache.TieredOptions.Keep).
func (s *Store) SetKeep(_ context.Context, key string, e *cache.Entry, keep func(*cache.Entry) bool) error {
	if e == nil {
		return errNilEntry
	}
	it, ttl := s.prepare(key, e, s.now())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drainLocked()
	if keep != nil && !keep(e) {
		return cache.ErrStale
	}
	return s.setLocked(it, ttl)
}

// Delete drops keys; absent keys are not an error.
func (s *Store) Delete(_ context.Context, keys ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drainLocked()
	for _, key := range keys {
		h := s.hash(key)
		it := s.keys[h]
		if it != nil && it.key != key {
			// Another key's, live under the same hash: ristretto's item
			// at h is that key's, not to be dropped.
			continue
		}
		if it != nil {
			s.retireLocked(it)
		}
		// Also when unindexed: ristretto may still hold a dead item there.
		s.c.Del(h)
	}
	return nil
}

// KeysWithTag returns up to max keys stored under tag, sorted, and whether
// there were more: the admin API lists with it every entry of one URI (its
// hosts, queries and variants) from the tag index, without a scan.
func (s *Store) KeysWithTag(tag string, max int) (keys []string, more bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drainLocked()
	keys = s.keysLocked(tag)
	slices.Sort(keys)
	if len(keys) > max {
		return keys[:max], true
	}
	return keys, false
}

// Clear drops every entry.
func (s *Store) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c.Clear()
	s.resetLocked(false)
}

// Close drops every entry and stops ristretto's goroutines. The Store must
// not be used, not even by a concurrent Get, once Close is called.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.sweepTimer != nil {
		s.sweepTimer.Stop()
	}
	s.c.Close()
	s.resetLocked(true)
}

// Wait blocks until every Set, Delete and DeleteTags made before it has
// been applied. Tests use it; serving code has no need to.
func (s *Store) Wait() { s.c.Wait() }

// Bytes is the sum of Entry.Size over the entries held (or being admitted).
// It stays within MaxBytes except briefly after a key is overwritten with a
// larger entry: ristretto makes room for that on the next new key.
func (s *Store) Bytes() int64 { return s.bytes.Load() }

// Items is the number of entries held (or being admitted).
func (s *Store) Items() int64 { return s.items.Load() }

// gone is ristretto's callback for a value that left it or was refused.
// The value may be nil (ristretto evicts by hash and may find nothing
// stored), and may already be retired (replaced or deleted since); only
// the first death counts. It runs on ristretto's goroutine, or inside
// Clear and Close, so it must not wait for mu.
func (s *Store) gone(it *item) {
	if it == nil || !s.kill(it) {
		return
	}
	s.graveMu.Lock()
	s.grave = append(s.grave, it)
	s.graveAny.Store(true)
	s.graveMu.Unlock()
	// Unindex now if nobody is busy, so the entry's memory is released
	// without waiting for the next write.
	if s.mu.TryLock() {
		s.drainLocked()
		s.mu.Unlock()
	}
}

// kill marks it dead and uncounts it, once; it reports whether it did.
func (s *Store) kill(it *item) bool {
	if !it.dead.CompareAndSwap(false, true) {
		return false
	}
	s.bytes.Add(-it.cost)
	s.items.Add(-1)
	return true
}

// indexLocked makes it the live item of its key; heads are its tags'
// (linkLocked).
func (s *Store) indexLocked(it *item, heads []*tagNode) {
	s.keys[it.h] = it
	it.indexed = true
	s.linkLocked(it, heads)
	s.linkExpiryLocked(it)
	s.bytes.Add(it.cost)
	s.items.Add(1)
}

// retireLocked kills it and removes it from the index.
func (s *Store) retireLocked(it *item) {
	s.kill(it)
	s.unindexLocked(it)
}

// unindexLocked removes it from the index, unless its key has moved on to
// a newer item: that is how a late callback for an old value is ignored.
func (s *Store) unindexLocked(it *item) {
	if !it.indexed {
		return
	}
	delete(s.keys, it.h)
	s.unlinkAllLocked(it)
}

// hash is what keys, tags and ristretto's items are indexed by.
func (s *Store) hash(str string) uint64 { return maphash.String(s.seed, str) & s.hashMask }

// check is a key's second hash (item.chk), seeded apart from hash's: a
// key hit in ristretto under another key's hash must match it too, a
// chance of 2^-64 per pair of keys whose hashes collide, and neither seed
// is known outside the process, so no client can choose keys that collide.
func (s *Store) check(key string) uint64 { return maphash.String(s.checkSeed, key) }

// unlinkAllLocked marks it unindexed and removes it from its tags' lists;
// the caller removes or overwrites its slot in keys.
func (s *Store) unlinkAllLocked(it *item) {
	it.indexed = false
	s.unlinkExpiryLocked(it)
	for i := range it.nodes {
		if n := &it.nodes[i]; n.next != nil {
			s.unlinkLocked(n)
		}
	}
}

// drainLocked unindexes the items ristretto's callbacks reported dead.
func (s *Store) drainLocked() {
	if !s.graveAny.Load() {
		return // a callback storing now is drained by the next holder of mu
	}
	s.graveMu.Lock()
	grave := s.grave
	s.grave = nil
	s.graveAny.Store(false)
	s.graveMu.Unlock()
	for _, it := range grave {
		s.unindexLocked(it)
	}
}

// resetLocked empties the index after ristretto has been emptied. The maps
// keep their size for the entries to come, unless the store is closing.
func (s *Store) resetLocked(closing bool) {
	for _, it := range s.keys {
		s.kill(it)
		it.indexed = false // its late callback must not unindex a newer item
	}
	// The lists are dropped with their links as they stand: a DeleteTags
	// between two holds of mu must not walk on from its cursor (purge.go).
	s.resets++
	if closing {
		s.keys, s.tags, s.expiry = map[uint64]*item{}, map[uint64]*tagNode{}, map[int64]*item{}
	} else {
		clear(s.keys)
		clear(s.tags)
		clear(s.expiry)
	}
	s.graveMu.Lock()
	s.grave = nil
	s.graveAny.Store(false)
	s.graveMu.Unlock()
}
