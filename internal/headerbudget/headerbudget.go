// Package headerbudget bounds, for the whole process, the bytes of request
// header sections still being read (server.max_pending_header_bytes).
//
// Why: net/http keeps what it has read of a header section (its lines, and
// the fields it made of them) until the section ends, up to
// server.max_header_bytes (64 KiB) for up to server.read_header_timeout.
// A client that sends most of a large section and stalls holds that much
// for that long: about 84 KiB of heap for 60 KiB sent. 4096 such clients
// (server.max_connections) grew the heap by 338 MiB in under 5 s, over the
// deploy manifest's 256 MiB limit, and the admin listener, which has no
// connection bound, 252 MiB with 2000. NGINX reads a header into
// large_client_header_buffers (4 × 8 KiB per connection by default);
// here the bytes are the Go heap's, so this package counts them.
//
// What is counted: for each connection, the bytes of the header section
// it is reading, from the section's first byte, as long as the section
// has not ended. A section that arrives whole in one read (every ordinary
// request) is never counted.
//
// What happens at the bound: when a connection's section grows and the
// bytes held go over the budget, the other connections holding the most
// are cut, the one that grew longest ago first among equals, until the
// rest fit; their owners answer them 431 (RFC 6585 §5) and close them.
// The section that grows is never cut by its own growth, so a section as
// large as server.max_header_bytes is read even under a smaller budget:
// the bytes held stay within the budget plus one section.
package headerbudget

import (
	"sync"
	"sync/atomic"
)

// DefaultMax is server.max_pending_header_bytes' default: 512 stalled
// sections at server.max_header_bytes' 64 KiB, or all of
// server.max_connections' 4096 connections holding 8 KiB each (a section
// of ordinary size arrives whole and is never held at all). net/http's
// heap for it is about 1.4 times the bytes (48 MiB), well under the
// deploy manifest's 256 MiB.
const DefaultMax = 32 << 20

// Reader is a connection reading a header section.
type Reader interface {
	// Cut makes the connection answer 431 and close. It is called
	// without the Budget's lock held, possibly after the section ended
	// (the Hold then reports the cut).
	Cut()
}

// Budget is one process's bound. It is safe for concurrent use.
type Budget struct {
	mu    sync.Mutex
	max   int64
	held  int64 // under mu
	first *Hold // the holds counted, under mu
	tick  uint64

	heldA, connsA, maxA atomic.Int64
}

// Hold is one connection's place in a Budget. Its zero value is ready;
// it is used by one goroutine at a time (the connection's reader).
type Hold struct {
	r          Reader
	n          int64  // bytes counted; 0: not counted
	stamp      uint64 // tick of its last growth
	cut        bool   // cut while counted, under mu
	prev, next *Hold
}

// New returns a budget of max bytes (max <= 0: DefaultMax).
func New(max int64) *Budget {
	b := &Budget{}
	b.setMax(max)
	return b
}

func (b *Budget) setMax(max int64) {
	if max <= 0 {
		max = DefaultMax
	}
	b.max = max
	b.maxA.Store(max)
}

// SetMax changes the bound (max <= 0: DefaultMax). Lowered, the sections
// over it are cut at once, the largest first.
func (b *Budget) SetMax(max int64) {
	b.mu.Lock()
	b.setMax(max)
	cut := b.shrinkLocked(nil)
	b.mu.Unlock()
	for _, r := range cut {
		r.Cut()
	}
}

// Max is the bound in force; Held the bytes counted now; Conns the
// connections counted now.
func (b *Budget) Max() int64   { return b.maxA.Load() }
func (b *Budget) Held() int64  { return b.heldA.Load() }
func (b *Budget) Conns() int64 { return b.connsA.Load() }

// Counted reports whether h is counted now (read by h's own goroutine).
func (h *Hold) Counted() bool { return h.n > 0 }

// Grow counts n bytes (n > 0) of r's unfinished section in h, and cuts
// what no longer fits before it returns. It reports whether h itself was
// cut meanwhile, and then counts nothing.
func (b *Budget) Grow(h *Hold, r Reader, n int64) (cut bool) {
	b.mu.Lock()
	if h.cut {
		b.mu.Unlock()
		return true
	}
	b.tick++
	if h.n == 0 {
		h.r, h.prev, h.next = r, nil, b.first
		if b.first != nil {
			b.first.prev = h
		}
		b.first = h
		b.connsA.Add(1)
	}
	b.held += n - h.n
	h.n, h.stamp = n, b.tick
	var victims []Reader
	if b.held > b.max {
		victims = b.shrinkLocked(h)
	}
	b.heldA.Store(b.held)
	b.mu.Unlock()
	for _, v := range victims {
		v.Cut()
	}
	return false
}

// End takes h out of the count (its section ended, or its connection
// did) and reports whether it was cut meanwhile. h is ready to be used
// again.
func (b *Budget) End(h *Hold) (cut bool) {
	b.mu.Lock()
	if h.n > 0 {
		b.unlinkLocked(h)
	}
	cut = h.cut
	h.cut, h.r = false, nil
	b.heldA.Store(b.held)
	b.mu.Unlock()
	return cut
}

func (b *Budget) unlinkLocked(h *Hold) {
	if h.prev != nil {
		h.prev.next = h.next
	} else {
		b.first = h.next
	}
	if h.next != nil {
		h.next.prev = h.prev
	}
	b.held -= h.n
	h.n, h.prev, h.next = 0, nil, nil
	b.connsA.Add(-1)
}

// shrinkLocked takes holds out of the count until the bytes held fit
// the bound, or only keep is left, and returns their readers, to be cut:
// the largest first; among equals, the one that grew longest ago.
func (b *Budget) shrinkLocked(keep *Hold) []Reader {
	var cut []Reader
	for b.held > b.max {
		var victim *Hold
		for h := b.first; h != nil; h = h.next {
			if h == keep {
				continue
			}
			if victim == nil || h.n > victim.n || h.n == victim.n && h.stamp < victim.stamp {
				victim = h
			}
		}
		if victim == nil {
			break
		}
		cut = append(cut, victim.r)
		victim.cut = true
		b.unlinkLocked(victim)
	}
	b.heldA.Store(b.held)
	return cut
}
