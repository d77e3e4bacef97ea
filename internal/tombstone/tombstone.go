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
type Set struct {
	window time.Duration
	live   atomic.Int64 // number of tombstones, for a lock-free fast path
	mu     sync.RWMutex
	tags   map[string]time.Time
	all    time.Time // a purge of everything
}

// New keeps tombstones for window: the longest fetch plus the write
// queue's lag.
func New(window time.Duration) *Set {
	return &Set{window: window, tags: map[string]time.Time{}}
}

// Add records that tags were invalidated at now.
func (t *Set) Add(now time.Time, tags ...string) {
	if len(tags) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tag := range tags {
		t.tags[tag] = now
	}
	t.pruneLocked(now)
}

// AddAll records a purge of everything at now.
func (t *Set) AddAll(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.all = now
	t.pruneLocked(now)
}

// pruneLocked drops tombstones past the window and recounts live, which
// covers the purge-all stamp as well as the tags.
func (t *Set) pruneLocked(now time.Time) {
	for tag, at := range t.tags {
		if now.Sub(at) > t.window {
			delete(t.tags, tag)
		}
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
		if at, ok := t.tags[tag]; ok && now.Sub(at) <= t.window && !e.StoredAt.After(at) {
			return true
		}
	}
	return false
}
