package batch

import (
	"crypto/sha256"
	"time"
)

// DefaultMaxQuarantined is the zero value of Options.MaxQuarantined.
const DefaultMaxQuarantined = 1024

// quarantine remembers, for a while, the ids that made a bulk call fail and
// then failed alone: a Load for one is fetched in a call of its own and
// never joins (and fails) another client's batch. It holds at most max ids,
// each as a SHA-256 so a long id costs no more than a short one; when full,
// the id quarantined first is forgotten first (it may then fail one more
// shared call, whose isolation quarantines it again). Guarded by Loader.mu.
type quarantine struct {
	ttl   time.Duration
	max   int
	until map[[sha256.Size]byte]time.Time
	order []quarantined // adds, oldest first; an add is stale once its id is released or added again
}

type quarantined struct {
	k     [sha256.Size]byte
	until time.Time
}

func newQuarantine(ttl time.Duration, max int) *quarantine {
	return &quarantine{ttl: ttl, max: max, until: make(map[[sha256.Size]byte]time.Time)}
}

// empty reports whether no id is quarantined: a Load then need not read
// the clock to ask (has).
func (q *quarantine) empty() bool { return q.ttl <= 0 || len(q.until) == 0 }

// has reports whether id is quarantined at now.
func (q *quarantine) has(id string, now time.Time) bool {
	if q.ttl <= 0 || len(q.until) == 0 {
		return false
	}
	t, ok := q.until[sha256.Sum256([]byte(id))]
	return ok && now.Before(t)
}

// add quarantines id until now+ttl; it reports whether another id had to be
// forgotten to make room.
func (q *quarantine) add(id string, now time.Time) (evicted bool) {
	if q.ttl <= 0 {
		return false
	}
	k := sha256.Sum256([]byte(id))
	q.expire(now)
	if _, held := q.until[k]; !held {
		for len(q.until) >= q.max && len(q.order) > 0 {
			q.pop()
			evicted = true
		}
	}
	t := now.Add(q.ttl)
	q.until[k] = t
	q.order = append(q.order, quarantined{k, t})
	if len(q.order) > 2*q.max {
		q.compact()
	}
	return evicted
}

// release forgets id: it was just fetched alone and answered.
func (q *quarantine) release(id string) {
	if len(q.until) > 0 {
		delete(q.until, sha256.Sum256([]byte(id)))
	}
}

// live reports whether a is its id's latest add, not released.
func (q *quarantine) live(a quarantined) bool {
	t, ok := q.until[a.k]
	return ok && t.Equal(a.until)
}

// expire forgets the ids whose time is up. Every add has the same ttl, so
// adds expire in order.
func (q *quarantine) expire(now time.Time) {
	for len(q.order) > 0 {
		a := q.order[0]
		if q.live(a) && now.Before(a.until) {
			return
		}
		if q.live(a) {
			delete(q.until, a.k)
		}
		q.order = q.order[1:]
	}
}

// pop forgets the id added first that is still held.
func (q *quarantine) pop() {
	for len(q.order) > 0 {
		a := q.order[0]
		q.order = q.order[1:]
		if q.live(a) {
			delete(q.until, a.k)
			return
		}
	}
}

// compact drops stale adds, so order stays within twice the ids held.
func (q *quarantine) compact() {
	kept := make([]quarantined, 0, len(q.until))
	for _, a := range q.order {
		if q.live(a) {
			kept = append(kept, a)
		}
	}
	q.order = kept
}

// size is the number of ids held.
func (q *quarantine) size() int { return len(q.until) }
