// Package connlimit bounds the client connections a listener holds open at
// once (server.max_connections), as NGINX's worker_connections and
// HAProxy's maxconn do: past the bound the listener stops accepting, so
// new connections wait in the kernel's accept backlog rather than in the
// process, where each costs a goroutine, buffers and, for a client that
// does not read its answer, the answer itself.
//
// Before it stops, it makes room: an idle keep-alive connection (one
// that was answered and waits for its next request) is closed, oldest
// idle first, so that idle clients cannot keep active ones out. That is
// NGINX's ngx_drain_connections, which closes its "reusable" connections
// when it runs short; a client whose idle connection is closed opens
// another when it next has a request, as it must be ready to after any
// keep-alive close (RFC 9112 §9.3.1, §9.6). A new connection that has not
// sent its first request is not closed so: its request may be in flight
// (a client sends it right after connecting), and read_header_timeout
// bounds one that never comes. Only when no connection is idle does the
// listener wait, until one goes idle (and is closed for the next) or
// ends.
//
// A Slot is one accepted connection's place. The caller marks it idle and
// busy as the connection's state moves (net/http's ConnState), and
// releases it when the connection is closed: a hijacked connection (an
// upgrade's tunnel) keeps its slot until its new owner closes it, and is
// never closed to make room.
package connlimit

import (
	"errors"
	"sync"
	"sync/atomic"
)

// DefaultMax is server.max_connections' default: NGINX's
// worker_connections default (512) for the eight workers of a typical
// node, or HAProxy's usual maxconn of a few thousand. An idle keep-alive
// connection costs about 21 KiB (3,000 took 62 MiB more RSS), so the
// cap's idle connections hold about 84 MiB at most; it sits far below a
// container's file-descriptor limit, and above upstream.max_tunnels'
// default (1024), so tunnels alone never fill it.
const DefaultMax = 4096

// ErrClosed ends a wait: the listener is closed.
var ErrClosed = errors.New("connlimit: listener closed")

// Counter is told what the bound did: a connection closed to make room
// (Reaped), and a pause of the listener at the bound with no idle
// connection to close (Waited).
type Counter interface {
	ConnReaped()
	ConnWaited()
}

// Limiter holds one listener's slots. It is safe for concurrent use.
type Limiter struct {
	count Counter // nil: none

	mu   sync.Mutex
	max  int
	open int // slots held
	// idle lists the slots of idle connections, oldest at head.
	head, tail *Slot
	nidle      int
	// changed is closed when a slot is released, a connection goes idle
	// or the bound rises, while someone waits (waiters > 0).
	changed chan struct{}
	waiters int

	held atomic.Int64 // open, for Open without the lock
}

// New returns a Limiter of max slots (max <= 0: DefaultMax); count, if
// not nil, is told what the bound does.
func New(max int, count Counter) *Limiter {
	if max <= 0 {
		max = DefaultMax
	}
	return &Limiter{max: max, count: count, changed: make(chan struct{})}
}

// SetMax changes the bound (max <= 0: DefaultMax). Raised, waiting
// connections get in at once; lowered, the connections past it stay open,
// and no new one is accepted (but to replace an idle one) until enough
// have closed.
func (l *Limiter) SetMax(max int) {
	if max <= 0 {
		max = DefaultMax
	}
	l.mu.Lock()
	l.max = max
	l.wakeLocked()
	l.mu.Unlock()
}

// Max is the bound; Open the slots held.
func (l *Limiter) Max() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.max
}

// Open is the number of connections holding a slot.
func (l *Limiter) Open() int64 { return l.held.Load() }

// Wait returns once a new connection could be taken in (Take): a slot is
// free, or an idle connection could be closed for it. Before it does, the
// caller should not accept: the connections wait in the backlog. done
// ends the wait with ErrClosed. A wait that had to block is counted once.
func (l *Limiter) Wait(done <-chan struct{}) error {
	counted := false
	l.mu.Lock()
	for l.open >= l.max && l.nidle == 0 {
		if !counted && l.count != nil {
			l.count.ConnWaited()
		}
		counted = true
		ch := l.changed
		l.waiters++
		l.mu.Unlock()
		select {
		case <-ch:
		case <-done:
			l.mu.Lock()
			l.waiters--
			l.mu.Unlock()
			return ErrClosed
		}
		l.mu.Lock()
		l.waiters--
	}
	l.mu.Unlock()
	return nil
}

// Take gives a connection just accepted a slot: a free one, or else the
// slot of the oldest idle connection, which is closed (its reap, given
// when that connection was taken) to make room. ok is false when neither
// was there (the idle connection Wait saw took a request meanwhile): Wait
// again, then Take. reap is the new connection's own: it closes the
// connection at once (a lingering close would keep its socket open), from
// any goroutine, and reports false, closing nothing, when the client has
// sent bytes the server has not read yet (a request on its way: the
// connection is about to be busy).
func (l *Limiter) Take(reap func() bool) (s *Slot, ok bool) {
	s = &Slot{l: l, reap: reap}
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		if l.open < l.max {
			l.open++
			l.held.Add(1)
			return s, true
		}
		old := l.head
		if old == nil {
			return nil, false
		}
		l.unlinkLocked(old)
		old.state = stateReaping
		old.idle.Store(false)
		l.mu.Unlock()
		closed := old.reap()
		l.mu.Lock()
		if !closed {
			if old.state == stateReaping {
				old.state = stateBusy
			}
			continue
		}
		if l.count != nil {
			l.count.ConnReaped()
		}
		if old.state == stateReleased {
			// Its socket's close (the reap's, seen by its reader) gave
			// the slot back meanwhile: take it again.
			l.open++
			l.held.Add(1)
		} else {
			// The idle connection's slot becomes the new one's: open
			// stays as it is.
			old.state = stateReaped
		}
		return s, true
	}
}

func (l *Limiter) wakeLocked() {
	if l.waiters > 0 {
		close(l.changed)
		l.changed = make(chan struct{})
	}
}

func (l *Limiter) unlinkLocked(s *Slot) {
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		l.head = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	} else {
		l.tail = s.prev
	}
	s.prev, s.next = nil, nil
	l.nidle--
}

// Slot states.
const (
	stateBusy     = iota // in a request, hijacked, or closing: never reaped
	stateIdle            // waiting for a request: reaped first
	stateReaping         // being closed to make room (Take)
	stateReaped          // closed to make room: its slot went to another
	stateReleased        // given back
)

// Slot is one connection's place in its Limiter.
type Slot struct {
	l    *Limiter
	reap func() bool
	// idle mirrors state == stateIdle for Busy's fast path (a read on the
	// connection, which is most often not idle).
	idle       atomic.Bool
	state      int // under l.mu
	prev, next *Slot
}

// Idle marks the connection idle: answered, waiting for its next
// request, so it may be closed to make room, oldest idle first.
func (s *Slot) Idle() {
	l := s.l
	l.mu.Lock()
	if s.state == stateBusy {
		s.state = stateIdle
		s.idle.Store(true)
		s.prev, s.next = l.tail, nil
		if l.tail != nil {
			l.tail.next = s
		} else {
			l.head = s
		}
		l.tail = s
		l.nidle++
		l.wakeLocked()
	}
	l.mu.Unlock()
}

// Busy marks the connection in a request (its client sent a byte of one,
// or it was hijacked): it is no longer closed to make room. It costs an
// atomic load when the connection was not idle.
func (s *Slot) Busy() {
	if !s.idle.Load() {
		return
	}
	l := s.l
	l.mu.Lock()
	if s.state == stateIdle {
		l.unlinkLocked(s)
		s.state = stateBusy
		s.idle.Store(false)
	}
	l.mu.Unlock()
}

// Release gives the slot back: the connection is closed. Once; a slot
// reaped was handed on already, and gives nothing back.
func (s *Slot) Release() {
	l := s.l
	l.mu.Lock()
	switch s.state {
	case stateIdle:
		l.unlinkLocked(s)
		fallthrough
	case stateBusy, stateReaping:
		l.open--
		l.held.Add(-1)
		l.wakeLocked()
	}
	s.state = stateReleased
	s.idle.Store(false)
	l.mu.Unlock()
}
