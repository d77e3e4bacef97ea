package l1

import (
	"runtime"
	"slices"
)

// purgeChunk is how many entries DeleteTags visits per hold of mu. A
// route's tag names every entry of the route: walking its 65,536 entries
// in one hold of mu took about 150 ms, during which every Set, every Get
// that misses ristretto (it falls back to the index under mu), KeysWithTag
// and the expiry sweep waited, so one purge stalled a replica's misses and
// fills. 256, as the sweep's sweepChunk: a hold of a few hundred
// microseconds at most, while taking mu again costs little beside it.
const purgeChunk = 256

// DeleteTags drops every entry stored under any of tags and reports how
// many keys it dropped. It touches only those keys, whatever the cache
// size, and holds mu for at most purgeChunk of them at a time.
//
// Every entry stored under a tag before DeleteTags is called is dropped
// by the time it returns. One stored while it runs (between two of its
// holds of mu) may stay or go: the proxy adds its tombstones before it
// calls DeleteTags, so readers refuse such an entry anyway, and SetMany's
// keep refuses it (set.go); it is the first hold of mu that counts.
func (s *Store) DeleteTags(tags ...string) int {
	// cur is the walk's cursor (taglist.go), reused from tag to tag and
	// made for the first tag that has entries: purging tags that have
	// none (an id never cached) allocates nothing.
	var cur *tagNode
	n, visited := 0, 0
	s.mu.Lock()
	s.drainLocked()
	for _, tag := range tags {
		th := s.hash(tag)
		h := s.tags[th]
		if h == nil {
			continue
		}
		// At the tail, before the head: the walk goes from the newest
		// entry to the oldest, the head, so that the head, whose move
		// writes s.tags, goes last, and so that the entries linked from
		// now on (at the tail, past the cursor) are not walked.
		if cur == nil {
			cur = &tagNode{}
		}
		cur.th, cur.done = th, false
		cur.prev, cur.next = h.prev, h
		h.prev.next = cur
		h.prev = cur
		resets := s.resets
		for {
			if visited == purgeChunk {
				// The chunk is spent: mu is let go, and the goroutines
				// waiting for it are let run before it is taken again
				// (a Lock right after Unlock would most often take it
				// back ahead of them).
				s.heldMost = max(s.heldMost, visited)
				visited = 0
				s.mu.Unlock()
				runtime.Gosched()
				s.mu.Lock()
				s.drainLocked()
				if s.resets != resets {
					// Cleared meanwhile: every entry the walk had left
					// is gone, and the cursor's list with them.
					cur = &tagNode{}
					break
				}
			}
			last, dropped, seen := s.stepLocked(cur, tag, purgeChunk-visited)
			n += dropped
			visited += seen
			if last {
				break
			}
		}
		if cur.next != nil {
			cur.prev.next, cur.next.prev = cur.next, cur.prev
			cur.next, cur.prev = nil, nil
		}
	}
	s.heldMost = max(s.heldMost, visited)
	s.mu.Unlock()
	return n
}

// stepLocked walks cur's list back from cur, visiting at most budget
// entries, and drops those carrying tag. It reports whether the walk is
// over, how many entries it dropped and how many it visited.
//
// The walk ends at the list's head. The entries between the head and cur
// are those not yet visited; every other goroutine's change to the list
// keeps them so: a Set links its entry at the tail, which is past cur, a
// retired entry is unlinked where it stands, and when the head goes the
// next one is the next entry not visited, or, when none is left, the head
// passes cur and marks it done (unlinkLocked). Another walk's cursor in
// the way is stepped over, uncounted: there are no more of them than
// goroutines in DeleteTags.
func (s *Store) stepLocked(cur *tagNode, tag string, budget int) (last bool, dropped, visited int) {
	for !cur.done {
		t := cur.prev
		// cur moves ahead of t: t, kept or dropped, is behind it.
		cur.prev.next, cur.next.prev = cur.next, cur.prev
		cur.prev, cur.next = t.prev, t
		t.prev.next = cur
		t.prev = cur
		if t.it == nil {
			continue // another walk's cursor
		}
		last = t.head
		if slices.Contains(t.it.e.Tags, tag) {
			s.retireLocked(t.it) // unlinks t only, of this list's nodes
			s.c.Del(t.it.h)
			dropped++
		}
		visited++
		if last {
			return true, dropped, visited
		}
		if visited == budget {
			return false, dropped, visited
		}
	}
	return true, dropped, visited
}
