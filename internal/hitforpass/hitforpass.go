// Package hitforpass remembers, for a while, the cache keys whose responses
// were too large to store, so that the proxy streams their next requests
// straight through instead of buffering them only to give up again (what
// Varnish calls hit-for-pass).
//
// It exists apart from the proxy because it is a self-contained, bounded
// data structure: keys come from requests, so its memory must be bounded by
// bytes whatever a client sends, and that bound is easiest to check here,
// alone.
package hitforpass

import (
	"sync"
	"time"
)

// Set remembers keys whose responses are too large to cache, so their
// next requests stream straight through instead of being read twice.
//
// Keys come from requests, so the set is bounded by the bytes it holds
// (maxBytes), not by a count: ten thousand 4 KiB keys would be
// 40 MB. Past the budget the oldest key is forgotten first, which costs
// that key one more buffered attempt and nothing else. The zero value is
// ready to use; the lookup on every cached request takes no lock.
type Set struct {
	m sync.Map // key → *passUntil

	mu    sync.Mutex
	order []passRef // oldest first; refs to replaced or removed keys are skipped
	live  int       // keys in m
	bytes int64     // charged for the keys in m, see passBytes
}

// passUntil is one remembered key; its address tells a current ref from a
// stale one. vary is set on a URL's key whose too-large answer varied on
// these request headers: then only the variants added themselves pass.
type passUntil struct {
	until time.Time
	vary  []string
}

type passRef struct {
	key string
	p   *passUntil
}

const (
	maxBytes = 2 << 20
	// passOverhead is a key's cost beyond its bytes: the sync.Map entry,
	// the passUntil and the ref in order.
	passOverhead = 128
)

func passBytes(key string, vary []string) int64 {
	n := int64(len(key)) + passOverhead
	for _, v := range vary {
		n += int64(len(v)) + 16
	}
	return n
}

// Active reports whether key was added with an until after now, as a whole
// (Add, not AddVary); an expired key is forgotten.
func (p *Set) Active(key string, now time.Time) bool {
	on, vary := p.Lookup(key, now)
	return on && vary == nil
}

// Lookup reports whether key is remembered until after now, and, when it
// was added with AddVary, the request headers its answers vary on: the
// caller then asks again for the key of the request's own variant. An
// expired key is forgotten.
func (p *Set) Lookup(key string, now time.Time) (bool, []string) {
	v, ok := p.m.Load(key)
	if !ok {
		return false, nil
	}
	pu := v.(*passUntil)
	if now.Before(pu.until) {
		return true, pu.vary
	}
	p.mu.Lock()
	p.removeLocked(key, pu)
	p.mu.Unlock()
	return false, nil
}

// Add remembers key until the given time, replacing an earlier add of it.
func (p *Set) Add(key string, until time.Time) { p.add(key, nil, until) }

// AddVary remembers until the given time that key's answer was too large
// and varied on vary (RFC 9111 §4.1): hit-for-pass is per variant, so
// only the variants the caller adds with Add pass through, and a
// request for another variant of the URL is still cached.
func (p *Set) AddVary(key string, vary []string, until time.Time) { p.add(key, vary, until) }

func (p *Set) add(key string, vary []string, until time.Time) {
	pu := &passUntil{until: until, vary: vary}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, replaced := p.m.Swap(key, pu); !replaced {
		p.live++
		p.bytes += passBytes(key, vary)
	} else {
		p.bytes += passBytes(key, vary) - passBytes(key, old.(*passUntil).vary)
	}
	p.order = append(p.order, passRef{key, pu})
	for p.bytes > maxBytes && len(p.order) > 0 {
		ref := p.order[0]
		p.order[0] = passRef{} // release the key
		p.order = p.order[1:]
		p.removeLocked(ref.key, ref.p)
	}
	// Refs to replaced or expired keys pile up when the same keys are
	// added again; drop them once they outnumber the live ones, which
	// keeps order within twice the live keys at amortised O(1) per add.
	if len(p.order) > 2*p.live+64 {
		kept := make([]passRef, 0, 2*p.live+64)
		for _, ref := range p.order {
			if v, ok := p.m.Load(ref.key); ok && v.(*passUntil) == ref.p {
				kept = append(kept, ref)
			}
		}
		p.order = kept
	}
}

// removeLocked forgets key if pu is still what it maps to.
func (p *Set) removeLocked(key string, pu *passUntil) {
	if p.m.CompareAndDelete(key, pu) {
		p.live--
		p.bytes -= passBytes(key, pu.vary)
	}
}
