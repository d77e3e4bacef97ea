// Package tombstone remembers recent invalidations so that a cache can
// refuse to store or serve an answer fetched before them.
package tombstone

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
)

// Set closes the cache-aside race: a fetch that started before a
// write was invalidated can finish, and be stored (here or, asynchronously,
// by a peer in L2), after the invalidation ran. Every entry is stamped with
// its request time (RFC 9111 §4.2.3), so an entry whose tag was invalidated
// at or after that time is known to predate the write: it is neither
// stored nor served. A tombstone only needs to outlive the longest fetch
// plus the L2 write queue, so they are kept for a short window.
//
// Tags come from requests (client:{id}), so anyone who can send writes
// could grow the set. Two things bound it without ever costing more than
// misses:
//
//   - a tombstone holds a 64-bit hash of its tag (maphash, seeded per
//     Set), not the tag: it costs the same for a 3-byte tag and a 4 KiB
//     one, and a collision refuses an innocent entry, never serves a
//     stale one;
//   - past the byte budget, the oldest tombstones are folded into a fixed
//     array of time stamps indexed by the same hash (a time-stamped Bloom
//     filter with one function): what they refused is still refused,
//     together with the entries whose tags share their bucket. A flood
//     costs some misses on this replica, and never empties the cache, here
//     or on the peers (whose sets fill from the same published tags).
type Set struct {
	window   time.Duration
	maxBytes int64
	seed     maphash.Seed
	live     atomic.Int64 // number of tombstones, for a lock-free fast path
	// until is the instant past which no tombstone is within the window:
	// the latest invalidation (latest, guarded by mu) plus the window.
	// Tombstones leave only when an Add prunes, so after the last
	// invalidation live stays above zero until the next one; past until,
	// Stale answers without the lock and without hashing a tag. Without
	// it, every lookup after a purge (the bench's before each round, an
	// operator's) or after the last write took the read lock and hashed
	// every tag of its entry, for as long as no other write came.
	until  atomic.Pointer[time.Time]
	latest time.Time
	mu     sync.RWMutex
	tags   map[uint64]*node
	order  list      // tombstones by time of invalidation, oldest first
	bytes  int64     // what the tombstones are charged, nodeBytes each
	all    time.Time // a purge of everything
	// folded holds, per hash bucket, the latest invalidation folded into
	// it (unix ns; 0: none); foldedAt is the latest fold, so the whole
	// array is known to be expired once foldedAt is.
	folded   *[foldBuckets]int64
	foldedAt time.Time
	onFold   func(n int)
}

// DefaultMaxBytes is the budget New gives a Set: some 50,000 tombstones,
// whatever their tags' length, within one window.
const DefaultMaxBytes = 4 << 20

// nodeBytes is what one tombstone costs: the node and its map slot.
const nodeBytes = 80

// foldBuckets is the size of the overflow filter: 512 KiB of stamps,
// allocated at the first fold. With n distinct tags folded within a
// window, an innocent entry with k tags is refused with a probability of
// about k·n/foldBuckets: a flood must get some 50,000 writes answered 2xx
// within one window to fill the budget, and as many again to refuse most
// entries.
const foldBuckets = 1 << 16

// New keeps tombstones for window, the longest fetch plus the write
// queue's lag, within DefaultMaxBytes.
func New(window time.Duration) *Set { return NewBounded(window, DefaultMaxBytes) }

// NewBounded is New with a byte budget of its own.
func NewBounded(window time.Duration, maxBytes int64) *Set {
	return &Set{window: window, maxBytes: maxBytes, seed: maphash.MakeSeed(), tags: map[uint64]*node{}}
}

// OnFold sets a function told how many tombstones each prune folded into
// the overflow filter (a metric). Set it before the first Add.
func (t *Set) OnFold(f func(n int)) { t.onFold = f }

func (t *Set) hash(tag string) uint64 { return maphash.String(t.seed, tag) }

// Add records that tags were invalidated at now. It costs O(1) per tag,
// amortised: expired tombstones leave from the old end of the list, each
// once.
func (t *Set) Add(now time.Time, tags ...string) {
	if len(tags) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.noteLocked(now)
	for _, tag := range tags {
		h := t.hash(tag)
		if n := t.tags[h]; n != nil {
			if now.After(n.at) {
				n.at = now
			}
			t.order.moveToBack(n)
			continue
		}
		n := &node{h: h, at: now}
		t.tags[h] = n
		t.order.pushBack(n)
		t.bytes += nodeBytes
	}
	t.pruneLocked(now)
}

// AddAll records a purge of everything at now.
func (t *Set) AddAll(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.After(t.all) {
		t.all = now
	}
	t.noteLocked(now)
	t.pruneLocked(now)
}

// noteLocked records an invalidation at now in latest and until.
func (t *Set) noteLocked(now time.Time) {
	if now.After(t.latest) {
		t.latest = now
	}
	t.storeUntilLocked()
}

func (t *Set) storeUntilLocked() {
	if t.latest.IsZero() {
		return
	}
	u := t.latest.Add(t.window)
	t.until.Store(&u)
}

// pruneLocked drops tombstones past the window, folds the oldest into the
// overflow filter while over budget, and recounts live.
func (t *Set) pruneLocked(now time.Time) {
	for n := t.order.front(); n != nil && now.Sub(n.at) > t.window; n = t.order.front() {
		t.removeLocked(n)
	}
	folded := 0
	for n := t.order.front(); n != nil && t.bytes > t.maxBytes; n = t.order.front() {
		if t.folded == nil {
			t.folded = new([foldBuckets]int64)
		}
		b := &t.folded[n.h%foldBuckets]
		*b = max(*b, n.at.UnixNano())
		if n.at.After(t.foldedAt) {
			t.foldedAt = n.at
		}
		t.removeLocked(n)
		folded++
	}
	if folded > 0 && t.onFold != nil {
		t.onFold(folded)
	}
	if t.folded != nil && now.Sub(t.foldedAt) > t.window {
		t.folded, t.foldedAt = nil, time.Time{}
	}
	if !t.all.IsZero() && now.Sub(t.all) > t.window {
		t.all = time.Time{}
	}
	n := int64(len(t.tags))
	if !t.all.IsZero() {
		n++
	}
	if t.folded != nil {
		n++
	}
	t.live.Store(n)
}

func (t *Set) removeLocked(n *node) {
	t.order.remove(n)
	delete(t.tags, n.h)
	t.bytes -= nodeBytes
}

// Widen keeps tombstones for at least window from now on: a reload that
// raises the upstream timeout lets fetches run longer, and a tombstone
// must outlive the longest fetch that began before it. The window never
// narrows, since fetches begun under the longer timeout may still be
// running; a wider window costs only memory, which the byte budget bounds.
func (t *Set) Widen(window time.Duration) {
	t.mu.Lock()
	t.window = max(t.window, window)
	t.storeUntilLocked()
	t.mu.Unlock()
}

// Len is the number of tag tombstones kept, for tests and metrics.
func (t *Set) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.tags)
}

// Stale reports whether e was requested no later than an invalidation of
// one of its tags, or a purge of everything, within the window.
func (t *Set) Stale(e *cache.Entry, now time.Time) bool {
	if e == nil || t.live.Load() == 0 {
		return false
	}
	// Past until on both clocks (the folded stamps are compared on the
	// wall clock, the others on the monotonic one when both times have it).
	if u := t.until.Load(); u != nil && now.After(*u) && now.UnixNano() > u.UnixNano() {
		return false
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if !t.all.IsZero() && now.Sub(t.all) <= t.window && !e.StoredAt.After(t.all) {
		return true
	}
	for _, tag := range e.Tags {
		h := t.hash(tag)
		if n := t.tags[h]; n != nil && now.Sub(n.at) <= t.window && !e.StoredAt.After(n.at) {
			return true
		}
		if t.folded != nil {
			if at := t.folded[h%foldBuckets]; at != 0 {
				ft := time.Unix(0, at)
				if now.Sub(ft) <= t.window && !e.StoredAt.After(ft) {
					return true
				}
			}
		}
	}
	return false
}

// node is one tombstone in the map and in the list.
type node struct {
	h          uint64
	at         time.Time
	prev, next *node
}

// list is a doubly linked list of nodes, oldest first: the order in which
// tombstones expire, so pruning never looks past the first live one.
type list struct{ head, tail *node }

func (l *list) front() *node { return l.head }

func (l *list) pushBack(n *node) {
	n.prev, n.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = n
	} else {
		l.head = n
	}
	l.tail = n
}

func (l *list) remove(n *node) {
	if n.prev != nil {
		n.prev.next = n.next
	} else {
		l.head = n.next
	}
	if n.next != nil {
		n.next.prev = n.prev
	} else {
		l.tail = n.prev
	}
	n.prev, n.next = nil, nil
}

func (l *list) moveToBack(n *node) {
	if l.tail == n {
		return
	}
	l.remove(n)
	l.pushBack(n)
}
