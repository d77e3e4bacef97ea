package l1

import (
	"math"
	"time"
)

// The index expires entries itself rather than through ristretto's TTL,
// which costs every write an insert into a map of its expiration bucket
// (on ristretto's goroutine, into a map that grows from empty every five
// seconds) and every expiry four probes of ristretto's maps. Here an
// indexed item is linked into the list of its deadline's bucket: a write
// costs a lookup in a map of a few buckets and a splice next to the item
// written before it, both in cache. Once a second, while any item is
// indexed, a sweep retires the items of the buckets wholly past, as a
// tag's invalidation does: an expired entry's memory comes back within
// about two seconds of its deadline, while MaxBytes bounds it all along.
// Get never serves an expired entry in the meantime: it checks what is
// left of the entry's lifetime itself.

const (
	// expiryBucket is the width of a bucket of deadlines, and how often
	// the sweep runs.
	expiryBucket = time.Second
	// sweepChunk is how many items a sweep retires per hold of mu, so
	// that a bucket of many expired entries does not stall Get and Set.
	sweepChunk = 256
)

// since is the store's clock, which deadlines are in: the time since
// s.base by s.now. The default clock reads only the monotonic clock; an
// Options.Now is called, and its times' wall readings are compared where
// they carry no monotonic one (time.Time.Sub).
func (s *Store) since() int64 {
	if s.realClock {
		return int64(time.Since(s.base))
	}
	return int64(s.now().Sub(s.base))
}

// deadline is now+ttl, saturated.
func deadline(now int64, ttl time.Duration) int64 {
	if int64(ttl) > math.MaxInt64-now {
		return math.MaxInt64
	}
	return now + int64(ttl)
}

// bucket is the expiry bucket of a time of since's, rounded down (an
// Options.Now may go back before base).
func bucket(t int64) int64 {
	b := t / int64(expiryBucket)
	if t%int64(expiryBucket) < 0 {
		b--
	}
	return b
}

// linkExpiryLocked adds it to the list of its deadline's bucket (at its
// tail, before the head), and arms the sweep.
func (s *Store) linkExpiryLocked(it *item) {
	b := bucket(it.deadline)
	if len(s.expiry) == 0 || b < s.swept {
		// The sweep walks from here (a clock set back may give a
		// deadline before the buckets already swept).
		s.swept = b
	}
	if h := s.expiry[b]; h == nil {
		it.expNext, it.expPrev = it, it
		s.expiry[b] = it
	} else {
		it.expPrev, it.expNext = h.expPrev, h
		h.expPrev.expNext = it
		h.expPrev = it
	}
	if !s.sweepArmed && !s.closed {
		s.sweepArmed = true
		if s.sweepTimer == nil {
			s.sweepTimer = time.AfterFunc(expiryBucket, s.sweep)
		} else {
			s.sweepTimer.Reset(expiryBucket)
		}
	}
}

// unlinkExpiryLocked removes it from its bucket's list, and the bucket
// with its last item.
func (s *Store) unlinkExpiryLocked(it *item) {
	if it.expNext == nil {
		return
	}
	b := bucket(it.deadline)
	if it.expNext == it {
		delete(s.expiry, b)
	} else {
		it.expPrev.expNext, it.expNext.expPrev = it.expNext, it.expPrev
		if s.expiry[b] == it {
			s.expiry[b] = it.expNext
		}
	}
	// Cleared, so that an unindexed item ristretto still holds keeps no
	// neighbour alive.
	it.expNext, it.expPrev = nil, nil
}

// sweep is the timer's: it retires the expired items, sweepChunk at a
// time, and re-arms while any item is indexed.
func (s *Store) sweep() {
	for {
		s.mu.Lock()
		done := s.sweepLocked(sweepChunk)
		if done {
			s.sweepArmed = !s.closed && len(s.expiry) > 0
			if s.sweepArmed {
				s.sweepTimer.Reset(expiryBucket)
			}
		}
		s.mu.Unlock()
		if done {
			return
		}
	}
}

// sweepLocked retires up to budget items of the buckets wholly past and
// reports whether none is left. It walks the buckets from the first not
// yet swept up to now, about one per second of the clock, however many
// buckets the items' deadlines spread over: ranging over every bucket
// each second held mu for as long as the spread was wide (a year of
// max-age written every second is 31 million buckets).
func (s *Store) sweepLocked(budget int) bool {
	if s.closed {
		return true
	}
	s.drainLocked()
	past := bucket(s.since())
	for ; s.swept < past && len(s.expiry) > 0; s.swept++ {
		if past-s.swept > int64(len(s.expiry)) && s.expiry[s.swept] == nil {
			// Further behind than there are buckets (a clock that jumped,
			// as Options.Now may): the first bucket held is found in
			// their number of steps rather than the gap's, which a year's
			// jump made 31 million lookups under mu. Every bucket held is
			// at or after swept (linkExpiryLocked).
			next := int64(math.MaxInt64)
			for b := range s.expiry {
				next = min(next, b)
			}
			if next >= past {
				s.swept = past
				break
			}
			s.swept = next
		}
		// s.swept ends before now: (swept+1)·bucket <= now.
		for it := s.expiry[s.swept]; it != nil; it = s.expiry[s.swept] {
			if budget == 0 {
				return false
			}
			budget--
			s.retireLocked(it) // unlinks it, and the bucket with its last
			s.c.Del(it.h)
		}
	}
	return true
}
