package l1

import (
	"context"
	"time"

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
// also takes mu, the clock and the grave once rather than per entry.
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
	for start := 0; start < len(keys); start += setManyChunk {
		n := min(len(keys)-start, setManyChunk)
		for j := range n {
			e := entries[start+j]
			if e == nil {
				chunk[j], errs[start+j] = nil, errNilEntry
				continue
			}
			it, ttl := s.prepare(keys[start+j], e, now)
			chunk[j], ttls[j] = it, ttl
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
