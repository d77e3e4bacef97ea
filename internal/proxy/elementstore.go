package proxy

import (
	"context"
	"net/http"
	"sync"

	"github.com/sidecache/sidecache/internal/cache"
)

// manySetter is what storeElements uses of the cache when it has it
// (cache.Tiered): the writes of a bulk answer's entries together, which L1
// makes for fewer cache misses than one Set each (l1.Store.SetMany: in a
// large store each new key's slot and tags are a miss, and between two
// elements' Sets their ETag and header work left nothing to overlap them
// with; issue 23). A cache without it (a test's wrapper, the traced cache)
// gets one Set per entry, as a per-ID fetch's.
type manySetter interface {
	SetMany(ctx context.Context, keys []string, es []*cache.Entry, errs []error, keep func(*cache.Entry) bool)
}

// elementSets are the writes keepAs left for storeElements, for the
// elements of one bulk answer: under keys[i], es[i], whose error decides
// whether answer owner[i] is stored (-1: a Vary marker, whose error is
// ignored, as keepAs ignores it). cur is the answer being kept.
type elementSets struct {
	keys  []string
	es    []*cache.Entry
	owner []int
	errs  []error
	cur   int
}

var elementSetsPool = sync.Pool{New: func() any { return new(elementSets) }}

// add leaves the write of e under key for storeElements.
func (s *elementSets) add(key string, e *cache.Entry, owner int) {
	s.keys = append(s.keys, key)
	s.es = append(s.es, e)
	s.owner = append(s.owner, owner)
}

// storeElements makes the writes keepAs left in x.sets for answers, in
// the order it left them, and takes back the stored of the answers whose
// write failed: counted then as not stored (uncacheable), as keepElement
// counts an element keepAs did not store. It runs before the answers reach
// any request: a write that fails is never reported as stored. Each
// entry's admission (tombstones included) was judged when keepAs left it,
// as before a Set; an invalidation between the two is refused when the
// entry is read (fit), as one between admit and Set always was.
func (x *exchange) storeElements(ctx context.Context, answers []bulkAnswer, upstream http.Header) {
	s := x.sets
	x.sets = nil
	defer func() {
		clear(s.keys)
		clear(s.es)
		clear(s.errs)
		s.keys, s.es, s.owner, s.errs = s.keys[:0], s.es[:0], s.owner[:0], s.errs[:0]
		elementSetsPool.Put(s)
	}()
	if len(s.keys) == 0 {
		return
	}
	if cap(s.errs) < len(s.keys) {
		s.errs = make([]error, len(s.keys))
	}
	s.errs = s.errs[:len(s.keys)]
	// Asked again right before each write: an invalidation since keepAs
	// admitted the entry refuses it (admit.Options.Tombs). now may be
	// earlier than a tombstone: Stale refuses only the entries requested
	// before it, whenever it was asked.
	now := x.h.now()
	tombs := x.h.tombs
	keep := func(e *cache.Entry) bool { return !tombs.Stale(e, now) }
	if ms, ok := x.h.cache.(manySetter); ok {
		ms.SetMany(ctx, s.keys, s.es, s.errs, keep)
	} else {
		cache.SetEach(ctx, x.h.cache, s.keys, s.es, s.errs, keep)
	}
	for i, err := range s.errs {
		if err == nil || s.owner[i] < 0 {
			continue
		}
		x.h.log.Debug("cache set", "key", s.keys[i], "err", err)
		a := &answers[s.owner[i]]
		a.stored = false
		if a.e.Status == http.StatusOK {
			x.notStored(notStoredUncacheable, upstream)
		}
	}
}
