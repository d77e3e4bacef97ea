package bulkelem

import (
	"context"
	"sync"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/tombstone"
)

// Setter is the one write a cache without SetMany takes (Store).
type Setter interface {
	Set(ctx context.Context, key string, e *cache.Entry) error
}

// manySetter is what Store uses of the cache when it has it
// (cache.Tiered): the writes of a bulk answer's entries together, which L1
// makes for fewer cache misses than one Set each (l1.Store.SetMany: in a
// large store each new key's slot and tags are a miss, and between two
// elements' Sets their ETag and header work left nothing to overlap them
// with; issue 23). A cache without it (a test's wrapper, the traced cache)
// gets one Set per entry, as a per-ID fetch's.
type manySetter interface {
	SetMany(ctx context.Context, keys []string, es []*cache.Entry, errs []error, keep func(*cache.Entry) bool)
}

// Sets are the writes the keeping of one bulk answer's elements left for
// Store: under keys[i], es[i], whose error decides whether answer
// owner[i] is stored (-1: a Vary marker, whose error is ignored, as a
// per-ID fetch's keep ignores it). Cur is the answer being kept, the
// owner of the writes the keeping adds now.
type Sets struct {
	keys  []string
	es    []*cache.Entry
	owner []int
	errs  []error
	Cur   int
}

// setsPool holds the Sets of the bulk answers kept so far, reused by the
// next (their slices grow to a bulk call's ids once).
var setsPool = sync.Pool{New: func() any { return new(Sets) }}

// NewSets is an empty Sets, for one bulk answer; Store gives it back.
func NewSets() *Sets { return setsPool.Get().(*Sets) }

// Add leaves the write of e under key, for answer owner (-1: none), for
// Store.
func (s *Sets) Add(key string, e *cache.Entry, owner int) {
	s.keys = append(s.keys, key)
	s.es = append(s.es, e)
	s.owner = append(s.owner, owner)
}

// Store makes the writes Add left, in the order it left them; failed is
// told of each write that failed with its answer's index and key (not
// of a marker's). The caller takes the answer's stored back: it runs
// before the answers reach any request, so a write that fails is never
// reported as stored. s is given back for another answer: not used
// after.
//
// Each entry's admission (tombstones included) was judged when it was
// added, as before a Set; tombs are asked again right before each write,
// at now: an invalidation since refuses the entry (admit.Options.Tombs).
// now may be earlier than a tombstone: Stale refuses only the entries
// requested before it, whenever it was asked. An invalidation between the
// two is refused when the entry is read (the proxy's fit rule), as one
// between admit and Set always was.
func (s *Sets) Store(ctx context.Context, c Setter, tombs *tombstone.Set, now func() time.Time, failed func(owner int, key string, err error)) {
	defer func() {
		clear(s.keys)
		clear(s.es)
		clear(s.errs)
		s.keys, s.es, s.owner, s.errs, s.Cur = s.keys[:0], s.es[:0], s.owner[:0], s.errs[:0], 0
		setsPool.Put(s)
	}()
	if len(s.keys) == 0 {
		return
	}
	if cap(s.errs) < len(s.keys) {
		s.errs = make([]error, len(s.keys))
	}
	s.errs = s.errs[:len(s.keys)]
	at := now()
	keep := func(e *cache.Entry) bool { return !tombs.Stale(e, at) }
	if ms, ok := c.(manySetter); ok {
		ms.SetMany(ctx, s.keys, s.es, s.errs, keep)
	} else {
		cache.SetEach(ctx, c, s.keys, s.es, s.errs, keep)
	}
	for i, err := range s.errs {
		if err != nil && s.owner[i] >= 0 {
			failed(s.owner[i], s.keys[i], err)
		}
	}
}
