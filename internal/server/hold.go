package server

import (
	"context"
	"time"
)

// A write's answer waits for its invalidation (coherence.write_hold).
//
// The promise runs from the moment a write's answer reaches its client: a
// read starting max_lag later, anywhere, gets the new version. A peer keeps
// it by its own proof (it has heard everything published before its last
// heartbeat came back), which says nothing about a writer whose publish
// failed: under load the writer's invalidation timed out and was replayed a
// second or more later, while peers whose own heartbeats came back went on
// serving the old version past max_lag. So when the first attempt fails,
// the answer waits until the replay loop has published the write's tags,
// for at most write_hold (default max_lag): the answer then follows the
// publish and the promise holds as stated. Past the hold the answer goes
// out anyway (Redis may be gone for minutes; the write itself is done) and
// sidecache_invalidations_late_total counts it: for that write, peers drop
// the old version within max_lag of the publish, not of the answer.
//
// The hold runs from the oldest invalidation still unpublished, not from
// each write: every write waiting meanwhile is released at the same
// deadline, a write's second invalidation (its URI's, after its route's)
// adds no second wait, and once Redis has taken nothing for write_hold the
// next writes are answered at once (and counted) instead of each waiting
// out an outage that may last minutes.
type held struct {
	hold time.Duration
	late func() // counts one write answered before its publish

	// Guarded by the invalidator's mu: every retryLater bumps added and
	// tags its tags with it; a replay that published everything queued up
	// to generation g raises sent to g and closes sentCh for the waiters.
	added, sent uint64
	sentCh      chan struct{}
	since       time.Time // when the oldest unpublished generation was added

	// lost holds the tags the replay gave up, with the generation each was
	// last added in, for the writers waiting on them: released by the
	// replay like the others, they were not published. Cleared when no
	// writer waits.
	lost    map[string]uint64
	waiting int
}

// gaveUp records that the replay gave up tag, last added in gen; v.mu held.
func (v *invalidator) gaveUpLocked(tag string, gen uint64) {
	if v.held.waiting == 0 {
		return
	}
	if v.held.lost == nil {
		v.held.lost = map[string]uint64{}
	}
	v.held.lost[tag] = max(v.held.lost[tag], gen)
}

// lostSince reports whether one of tags, queued at gen, was given up
// since; v.mu held.
func (v *invalidator) lostSinceLocked(tags []string, gen uint64) bool {
	for _, t := range tags {
		if g, ok := v.held.lost[t]; ok && g >= gen {
			return true
		}
	}
	return false
}

// published records that every tag queued up to generation gen is out.
func (v *invalidator) published(gen uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if gen <= v.held.sent {
		return
	}
	v.held.sent = gen
	if gen == v.held.added {
		v.held.since = time.Time{}
	} else {
		v.held.since = time.Now() // what is left was added after the copy
	}
	close(v.held.sentCh)
	v.held.sentCh = make(chan struct{})
}

// await holds the caller until tags, queued at generation gen, are
// published, the hold has passed, or ctx ends (the request's own
// deadline), reporting whether they were published; a false is counted
// late, and so is a release for tags the replay gave up.
func (v *invalidator) await(ctx context.Context, gen uint64, tags []string) bool {
	v.mu.Lock()
	wait := time.Until(v.held.since.Add(v.held.hold))
	v.held.waiting++
	v.mu.Unlock()
	defer func() {
		v.mu.Lock()
		if v.held.waiting--; v.held.waiting == 0 {
			v.held.lost = nil
		}
		v.mu.Unlock()
	}()
	if wait <= 0 {
		v.lateOne()
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		v.mu.Lock()
		done, ch := v.held.sent >= gen, v.held.sentCh
		lost := done && v.lostSinceLocked(tags, gen)
		v.mu.Unlock()
		if lost {
			v.lateOne()
			return false
		}
		if done {
			return true
		}
		select {
		case <-ch:
		case <-t.C:
			v.lateOne()
			return false
		case <-ctx.Done():
			v.lateOne()
			return false
		}
	}
}

func (v *invalidator) lateOne() {
	if v.held.late != nil {
		v.held.late()
	}
}
