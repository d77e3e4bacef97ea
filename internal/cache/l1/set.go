package l1

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unsafe"

	"github.com/sidecache/sidecache/internal/cache"
)

// setManyChunk is how many entries SetMany writes per hold of mu: about a
// bulk call's (bench/miss-vs-hit.sh's carry 22 ids), more than the CPU
// keeps lookups in flight at once, and few enough that a large bulk
// answer does not stall the Gets that miss (they take mu) for all of its
// entries.
const setManyChunk = 16

// SetMany is Set for each keys[i] and entries[i], its error in errs[i]
// (len(errs) >= len(keys)): the same entries kept, the same bound,
// admission, lifetimes and tag index, as the Sets one after another in
// that order would give. It is for the entries of one bulk answer, each a
// key never stored before: in a large store each Set waits on a cache
// miss for the key's slot and one for each new tag's (an id's, a URI's),
// and the work between two Sets of a bulk answer (its element's ETag, its
// header) left nothing to overlap them with. Here the slots of a chunk of
// entries are looked up back to back first, so that the CPU waits for
// them together, and the Sets that follow find them in cache; the chunk
// also takes mu, the clock and the grave once rather than per entry, and
// the call measures each run of entries sharing one header map, and hashes
// the route tag they share, once (sizeMemo, hashTags).
// (bench/miss-vs-hit.sh's profile on the shared AMD: the L1 write of a
// batched miss took 2.06 and 2.14 µs per request with one Set each, 1.61
// and 1.81 with SetMany, its key and tag lookups 0.64 µs then 0.47.)
//
// keep, if not nil, is asked for each entry under mu, right before it is
// written; an entry it refuses is not written (the key's entry, if any,
// stays), with cache.ErrStale. The proxy asks whether an invalidation
// (its tombstone) has come since the entry was requested: an
// invalidation adds its tombstones before it takes mu for DeleteTags, so
// an entry is either refused or written before DeleteTags runs, which then
// drops it. Writing the chunk's entries after the whole bulk answer was
// split must not widen the window in which one predating an invalidation
// lands after it.
func (s *Store) SetMany(_ context.Context, keys []string, entries []*cache.Entry, errs []error, keep func(*cache.Entry) bool) {
	now := s.now()
	var chunk [setManyChunk]*item
	var ttls [setManyChunk]time.Duration
	var memo sizeMemo
	var prev *item
	for start := 0; start < len(keys); start += setManyChunk {
		n := min(len(keys)-start, setManyChunk)
		for j := range n {
			e := entries[start+j]
			if e == nil {
				chunk[j], errs[start+j] = nil, errNilEntry
				continue
			}
			it, ttl := s.prepareLike(keys[start+j], e, now, memo.of(e.Header), prev)
			chunk[j], ttls[j], prev = it, ttl, it
		}
		s.mu.Lock()
		s.drainLocked()
		s.warmLocked(chunk[:n])
		for j, it := range chunk[:n] {
			switch {
			case it == nil:
			case keep != nil && !keep(it.e):
				errs[start+j] = cache.ErrStale
			default:
				errs[start+j] = s.setLocked(it, ttls[j])
			}
		}
		s.mu.Unlock()
		clear(chunk[:n])
	}
}

// warmLocked looks up, back to back, the slots in keys and tags that
// setLocked will read for items, and reports how many were taken: only so
// that the lookups are not optimised away. setLocked looks them up again
// (now in cache), as the Sets before it may have written them.
func (s *Store) warmLocked(items []*item) int {
	n := 0
	for _, it := range items {
		if it == nil {
			continue
		}
		if s.keys[it.h] != nil {
			n++
		}
		for i := range min(len(it.nodes), linkAhead) {
			if s.tags[it.nodes[i].th] != nil {
				n++
			}
		}
	}
	return n
}

var errNilEntry = errors.New("l1: set: nil entry")

// prepare makes the item for e under key, all that Set works out before
// it takes mu, and returns what is left of e's lifetime at now.
func (s *Store) prepare(key string, e *cache.Entry, now time.Time) (*item, time.Duration) {
	return s.prepareLike(key, e, now, cache.HeaderSize(e.Header), nil)
}

// prepareLike is prepare with what an entry of the same bulk answer has
// had worked out already: hs, cache.HeaderSize(e.Header), and prev, the
// item prepared before it (nil if none), whose tags' hashes hashTags takes
// for the same strings (the route's tag, which every element carries).
func (s *Store) prepareLike(key string, e *cache.Entry, now time.Time, hs int64, prev *item) (*item, time.Duration) {
	ttl := e.Remaining(now)
	it := newItem(key, e, s.hash(key), hs)
	it.chk = s.check(key)
	it.deadline = deadline(int64(now.Sub(s.base)), ttl)
	s.hashTags(it, prev)
	return it, ttl
}

// sizeMemo is cache.HeaderSize of the last header map SetMany sized: the
// entries of one bulk answer share one map (cache.Entry.SetETag), and
// walking it for each was most of what sizing an entry cost.
type sizeMemo struct {
	h  unsafe.Pointer // the map's identity (nil: none yet, or a nil map)
	hs int64
}

// of returns cache.HeaderSize(h), walking h only if it is not the map
// asked last.
func (m *sizeMemo) of(h http.Header) int64 {
	p := *(*unsafe.Pointer)(unsafe.Pointer(&h)) // a map value is a pointer
	if p == nil || p != m.h {
		m.h, m.hs = p, cache.HeaderSize(h)
	}
	return m.hs
}

// setLocked is Set's work under mu, for it made by prepare.
func (s *Store) setLocked(it *item, ttl time.Duration) error {
	key := it.key
	// The key's slot and its tags' heads are looked up back to back, before
	// anything is written: in a large store each is a cache miss (a batched
	// miss's key and id tag are new), and with nothing between them the CPU
	// waits for them together rather than one after another.
	old := s.keys[it.h] // key's live item, or another key's with its hash
	keep := ttl > 0 && it.cost <= s.maxBytes
	var heads [linkAhead]*tagNode
	ahead := heads[:0]
	if keep {
		ahead = heads[:min(len(it.nodes), linkAhead)]
		for i := range ahead {
			ahead[i] = s.tags[it.nodes[i].th]
		}
	}
	if !keep {
		if old != nil && old.key == key {
			s.retireLocked(old)
			s.c.Del(old.h)
		}
		if ttl > 0 {
			return fmt.Errorf("%w: %d bytes over l1.max_bytes %d", ErrRejected, it.cost, s.maxBytes)
		}
		return nil
	}
	if old != nil {
		// Retired but left in keys: indexLocked overwrites its slot.
		s.kill(old)
		s.unlinkAllLocked(old)
		// Deleted from ristretto even when it is this key's: if
		// ristretto has not applied old's write yet, it takes this write
		// as a second new key and its policy, which has the key by then,
		// rejects it, naming the live item (TestRewriteBeforeApplied).
		// The delete is applied between the two, in order.
		s.c.Del(old.h)
		// Unlinking old wrote s.tags: the heads are looked up again.
		ahead = nil
	}
	s.indexLocked(it, ahead)
	// No TTL: the index expires the item (expiry.go).
	if !s.c.Set(it.h, it, it.cost) {
		// Dropped under contention or after Close: nothing will call back.
		s.retireLocked(it)
		return fmt.Errorf("%w: dropped", ErrRejected)
	}
	return nil
}
