// Package tombstone remembers recent invalidations so that a cache can
// refuse to store or serve an answer fetched before them.
package tombstone

import (
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
// Tags come from requests (client:{id}), so a burst of writes to distinct
// IDs would grow the set without bound. It is bounded by bytes instead: past
// the budget the oldest tombstones are folded into the purge-of-everything
// stamp, which refuses a superset of what they refused, so the bound costs
// some misses and never a stale answer.
type Set struct {
	window   time.Duration
	maxBytes int64
	live     atomic.Int64 // number of tombstones, for a lock-free fast path
	mu       sync.RWMutex
	tags     map[string]*node
	order    list      // tombstones by time of invalidation, oldest first
	bytes    int64     // what the tombstones are charged, see nodeBytes
	all      time.Time // a purge of everything
}

// DefaultMaxBytes is the budget New gives a Set: some 30,000 tombstones of
// short tags, or 1,000 of 4 KiB ones, within one window.
const DefaultMaxBytes = 4 << 20

// nodeOverhead is what one tombstone costs beyond its tag: the node and
// its map slot.
const nodeOverhead = 96

func nodeBytes(tag string) int64 { return int64(len(tag)) + nodeOverhead }

// New keeps tombstones for window, the longest fetch plus the write
// queue's lag, within DefaultMaxBytes.
func New(window time.Duration) *Set { return NewBounded(window, DefaultMaxBytes) }

// NewBounded is New with a byte budget of its own.
func NewBounded(window time.Duration, maxBytes int64) *Set {
	return &Set{window: window, maxBytes: maxBytes, tags: map[string]*node{}}
}

// Add records that tags were invalidated at now. It costs O(1) per tag,
// amortised: expired tombstones leave from the old end of the list, each
// once.
func (t *Set) Add(now time.Time, tags ...string) {
	if len(tags) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tag := range tags {
		if n := t.tags[tag]; n != nil {
			if now.After(n.at) {
				n.at = now
			}
			t.order.moveToBack(n)
			continue
		}
		n := &node{tag: tag, at: now}
		t.tags[tag] = n
		t.order.pushBack(n)
		t.bytes += nodeBytes(tag)
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
	t.pruneLocked(now)
}

// pruneLocked drops tombstones past the window, folds the oldest into the
// purge-of-everything stamp while over budget, and recounts live.
func (t *Set) pruneLocked(now time.Time) {
	for n := t.order.front(); n != nil && now.Sub(n.at) > t.window; n = t.order.front() {
		t.removeLocked(n)
	}
	for n := t.order.front(); n != nil && t.bytes > t.maxBytes; n = t.order.front() {
		if n.at.After(t.all) {
			t.all = n.at
		}
		t.removeLocked(n)
	}
	if !t.all.IsZero() && now.Sub(t.all) > t.window {
		t.all = time.Time{}
	}
	n := int64(len(t.tags))
	if !t.all.IsZero() {
		n++
	}
	t.live.Store(n)
}

func (t *Set) removeLocked(n *node) {
	t.order.remove(n)
	delete(t.tags, n.tag)
	t.bytes -= nodeBytes(n.tag)
}

// Len is the number of tag tombstones kept, for tests and metrics.
// Widen keeps tombstones for at least window from now on: a reload that
// raises the upstream timeout lets fetches run longer, and a tombstone
// must outlive the longest fetch that began before it. The window never
// narrows, since fetches begun under the longer timeout may still be
// running; a wider window costs only memory, which the byte budget bounds.
func (t *Set) Widen(window time.Duration) {
	t.mu.Lock()
	t.window = max(t.window, window)
	t.mu.Unlock()
}

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
	t.mu.RLock()
	defer t.mu.RUnlock()
	if !t.all.IsZero() && now.Sub(t.all) <= t.window && !e.StoredAt.After(t.all) {
		return true
	}
	for _, tag := range e.Tags {
		if n := t.tags[tag]; n != nil && now.Sub(n.at) <= t.window && !e.StoredAt.After(n.at) {
			return true
		}
	}
	return false
}

// node is one tombstone in the map and in the list.
type node struct {
	tag        string
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
