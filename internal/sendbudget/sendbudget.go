// Package sendbudget bounds, for the whole process, the bytes that client
// writes hold while they wait on a full socket
// (server.max_pending_send_bytes).
//
// Why: a write to a client that does not read waits until the kernel's
// send buffer has room, up to server.write_timeout, and holds the bytes it
// was handed all that time. For an answer from the cache those bytes are
// the entry's body: once the cache has evicted the entry, the waiting
// write is all that keeps it, so without a bound the clients that never
// read hold up to server.max_connections × cache.max_body_bytes (32 GiB at
// the defaults). The kernel takes an answer's first MiBs itself (a send
// buffer grows to net.ipv4.tcp_wmem's maximum, 4 MiB by default), so the
// writes that wait are those of larger answers, or of many clients at
// once under the kernel's memory pressure: 100 clients that never read
// 100 different 6 MiB answers held 822 MiB RSS (bench/cmd/nonreaders,
// GOGC=25), 215 MiB under the default budget. NGINX serves its cache from files (sendfile) and Varnish from
// reference-counted objects in its storage, whose size is bounded; here
// the bytes are the Go heap's, so this package counts them.
//
// What is counted: each waiting write's bytes, from the moment the socket
// did not take it whole until it returns. A body written to several
// clients at once is counted once: the writes of one body end at its last
// byte (net/http hands the connection the rest of the handler's Write,
// which runs to the body's end), so writes whose last byte is the same
// byte share one count, the largest of them. Writes that the socket takes
// at once (every answer that fits its buffer) are never seen here.
//
// What happens at the bound: when a write begins to wait and the bytes
// held go over the budget, the writes held longest without progress are
// cut, body by body, until the rest fit: their connections are closed, so
// their clients see the connection end before the Content-Length they
// were promised, never a wrong answer. A body is as recent as its most
// recent writer: a body one client still reads is kept over one nobody
// reads. Progress is what the socket took of a write (Sender.Taken),
// looked at whenever a cut must be chosen. The write that begins is never
// cut by its own arrival, so one body larger than the whole budget still
// reaches a client that reads it: the bytes held stay within
// max(budget, the largest single write).
package sendbudget

import (
	"sync"
	"sync/atomic"
)

// DefaultMax is server.max_pending_send_bytes' default: eight answers at
// cache.max_body_bytes' default (8 MiB), a quarter of cache.l1.max_bytes'
// default (256 MiB). Answers that reach clients which read are held for
// the time their socket takes them, and one body shared by many clients
// counts once, so only clients that stop reading different large answers
// come near it.
const DefaultMax = 64 << 20

// Sender is a connection whose writes may wait.
type Sender interface {
	// Taken reports how many bytes of its waiting writes the socket has
	// taken so far: any number, which does not change while its client
	// reads nothing.
	Taken() int64
	// Cut closes the connection: its waiting write fails at once. It is
	// called without the Budget's lock held, possibly after the write
	// ended.
	Cut()
}

// Budget is one process's bound. It is safe for concurrent use.
type Budget struct {
	mu     sync.Mutex
	max    int64
	held   int64           // bytes counted, under mu
	bodies map[*byte]*body // the waiting writes by the last byte they write
	tick   uint64          // a logical clock: each Begin, each look at progress

	// Mirrors of what is under mu, for the metrics.
	heldA, writesA, maxA atomic.Int64
}

// body is the writes that end at one byte, and the bytes counted for them.
type body struct {
	key   *byte
	bytes int64
	first *Hold
}

// Hold is one waiting write's place in a Budget. A connection keeps one:
// it has at most one write waiting at a time. Its zero value is ready.
type Hold struct {
	s          Sender
	b          *body // nil: not counted (ended, or cut)
	prev, next *Hold
	seen       int64  // s.Taken() when last looked at
	stamp      uint64 // the tick at which it began or last made progress
}

// New returns a budget of max bytes (max <= 0: DefaultMax).
func New(max int64) *Budget {
	b := &Budget{bodies: map[*byte]*body{}}
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

// SetMax changes the bound (max <= 0: DefaultMax). Lowered, the writes
// over it are cut at once, the ones held longest without progress first.
func (b *Budget) SetMax(max int64) {
	b.mu.Lock()
	b.setMax(max)
	var cut []Sender
	if b.held > b.max {
		cut = b.shrinkLocked(nil)
	}
	b.mu.Unlock()
	for _, s := range cut {
		s.Cut()
	}
}

// Max is the bound in force; Held the bytes counted now; Writes the
// writes waiting now.
func (b *Budget) Max() int64    { return b.maxA.Load() }
func (b *Budget) Held() int64   { return b.heldA.Load() }
func (b *Budget) Writes() int64 { return b.writesA.Load() }

// Begin counts p, which s's write is about to wait to send, in h, and
// cuts what no longer fits (see the package doc) before it returns. The
// caller calls End(h) once the write returns, whatever it returned.
func (b *Budget) Begin(h *Hold, s Sender, p []byte) {
	if len(p) == 0 {
		return
	}
	key, n := &p[len(p)-1], int64(len(p))
	b.mu.Lock()
	b.tick++
	h.s, h.seen, h.stamp = s, s.Taken(), b.tick
	bd := b.bodies[key]
	if bd == nil {
		bd = &body{key: key}
		b.bodies[key] = bd
	}
	h.b, h.prev, h.next = bd, nil, bd.first
	if bd.first != nil {
		bd.first.prev = h
	}
	bd.first = h
	if n > bd.bytes {
		b.held += n - bd.bytes
		bd.bytes = n
	}
	b.writesA.Add(1)
	var cut []Sender
	if b.held > b.max {
		cut = b.shrinkLocked(bd)
	}
	b.heldA.Store(b.held)
	b.mu.Unlock()
	for _, s := range cut {
		s.Cut()
	}
}

// End takes h's write out of the count: it returned (or was cut).
func (b *Budget) End(h *Hold) {
	b.mu.Lock()
	if bd := h.b; bd != nil {
		if h.prev != nil {
			h.prev.next = h.next
		} else {
			bd.first = h.next
		}
		if h.next != nil {
			h.next.prev = h.prev
		}
		b.writesA.Add(-1)
		if bd.first == nil {
			delete(b.bodies, bd.key)
			b.held -= bd.bytes
			b.heldA.Store(b.held)
		}
	}
	h.s, h.b, h.prev, h.next = nil, nil, nil, nil
	b.mu.Unlock()
}

// shrinkLocked takes bodies out of the count until the bytes held fit
// the bound, or only keep is left, and returns the senders whose writes
// must be cut. The body whose most recent writer made progress (or began)
// longest ago goes first; among equals, the larger.
func (b *Budget) shrinkLocked(keep *body) []Sender {
	b.tick++
	for _, bd := range b.bodies {
		for h := bd.first; h != nil; h = h.next {
			if t := h.s.Taken(); t != h.seen {
				h.seen, h.stamp = t, b.tick
			}
		}
	}
	var cut []Sender
	for b.held > b.max {
		var victim *body
		var vs uint64
		for _, bd := range b.bodies {
			if bd == keep {
				continue
			}
			s := bd.latest()
			if victim == nil || s < vs || s == vs && bd.bytes > victim.bytes {
				victim, vs = bd, s
			}
		}
		if victim == nil {
			break
		}
		for h := victim.first; h != nil; {
			next := h.next
			cut = append(cut, h.s)
			h.b, h.prev, h.next = nil, nil, nil
			b.writesA.Add(-1)
			h = next
		}
		delete(b.bodies, victim.key)
		b.held -= victim.bytes
	}
	b.heldA.Store(b.held)
	return cut
}

// latest is the stamp of bd's most recent writer.
func (bd *body) latest() uint64 {
	var s uint64
	for h := bd.first; h != nil; h = h.next {
		s = max(s, h.stamp)
	}
	return s
}
