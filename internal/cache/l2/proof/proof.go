// Package proof keeps a replica's proof that it hears the invalidation
// channel: from its own heartbeats coming back, the time before which every
// invalidation published has been applied here (Proven), and the floor
// below which that proof does not reach (Floor).
//
// The L2 store (internal/cache/l2, heartbeat.go) publishes the beats and
// feeds what happens to them here: each about to be sent (Sending), each
// the master acknowledged (Published), each that came back (Heard), each
// subscription confirmed (ForgetAcked, and Gap after a rebuilt one). This
// package is the bookkeeping alone — no Redis, no clock of its own — so
// that its rules can be read and tested apart from the channel. Why those
// rules hold is the store's (heartbeat.go); in short:
//
// After a gap (a heartbeat lost, the subscription rebuilt) the proof does
// not advance until heartbeats have come back for the grace (3/4 MaxLag,
// the store's) in a row. A rebuilt subscription also sets the floor:
// invalidations published while it was down are lost, so the proof covers
// only entries whose request left after the new subscription was
// confirmed. A beat the master acknowledged that never came back on a
// subscription that stayed up was lost on the way, and sets the floor too.
package proof

import (
	"sync"
	"time"
)

// Tracker is what the subscriber learns from this replica's heartbeats.
// Its methods are safe for concurrent use.
type Tracker struct {
	grace time.Duration // how long beats must come back in a row after a gap

	mu     sync.Mutex
	last   uint64    // the last sequence number heard
	streak time.Time // when the first beat of the current unbroken run was sent
	proven time.Time
	floor  time.Time // when the current subscription was confirmed after a gap
	beats  uint64    // own beats heard, for State
	// acked are the sequence numbers above last whose PUBLISH the master
	// acknowledged, oldest first, at most maxAcked; ackedLost: some were
	// forgotten to respect that bound.
	acked     []uint64
	ackedLost bool
	// sending is the beat whose PUBLISH is on its way (or the last one
	// sent); forgot is what it was when a subscription was last confirmed:
	// an acknowledgement of a beat sent before then says nothing about
	// that subscription, which may not have existed when Redis ran it.
	sending, forgot uint64
}

// maxAcked bounds Tracker.acked: 16 s of beats at the default max_lag that
// never came back. Past it a skip in the sequence counts as a loss.
const maxAcked = 64

// New returns a tracker whose proof advances only after beats have come
// back for grace in a row since the last gap.
func New(grace time.Duration) *Tracker { return &Tracker{grace: grace} }

// State is the proof's state (l2.Proof has its meaning).
type State struct {
	Proven time.Time
	Floor  time.Time
	Beats  uint64
}

// Proven is the send time of the latest heartbeat that proves (see the
// package doc); the zero time before the first.
func (p *Tracker) Proven() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.proven
}

// Floor is the floor: entries whose request left before it are not
// covered by Proven.
func (p *Tracker) Floor() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.floor
}

// State returns the proof's state.
func (p *Tracker) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	return State{Proven: p.proven, Floor: p.floor, Beats: p.beats}
}

// Gap records that the subscription was rebuilt and confirmed at t.
func (p *Tracker) Gap(t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t.After(p.floor) {
		p.floor = t
	}
}

// Sending records that heartbeat seq is about to be published.
func (p *Tracker) Sending(seq uint64) {
	p.mu.Lock()
	p.sending = seq
	p.mu.Unlock()
}

// Published records that the master acknowledged heartbeat seq.
func (p *Tracker) Published(seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if seq <= p.last {
		return // heard already
	}
	if seq <= p.forgot {
		// Sent before the current subscription was confirmed: Redis may
		// have run it before the subscription existed, and its
		// acknowledgement may come after the confirmation (a loaded
		// machine). Counting it would report a loss that is the gap's.
		return
	}
	if len(p.acked) == maxAcked {
		p.acked, p.ackedLost = p.acked[1:], true
	}
	p.acked = append(p.acked, seq)
}

// Unheard is how many of this replica's beats the master acknowledged
// that have not come back (at least maxAcked once some were forgotten).
func (p *Tracker) Unheard() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ackedLost {
		return maxAcked
	}
	return len(p.acked)
}

// ForgetAcked is called when a subscription is confirmed: beats published
// before it may not reach it, and their loss is the gap's (Floor), not
// one that Heard should report.
func (p *Tracker) ForgetAcked() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.acked, p.ackedLost = nil, false
	p.forgot = p.sending
}

// Heard records one of this replica's heartbeats, seq sent at sent, coming
// back at now. It
// reports whether a beat published before it was acknowledged by the
// master and never came back on a subscription that stayed up: Redis
// delivers on a connection in the order it ran the PUBLISHes, and beats are
// published one after another, so such a beat was lost on the way, and the
// invalidations published around it may have been too. That happens on a
// read replica that resynchronised in full (the relay tier, l2's
// relay.go), and nowhere else without the connection closing; it then sets
// the floor at now, as a rebuilt subscription does (see Gap).
func (p *Tracker) Heard(seq uint64, sent, now time.Time) (lost bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if seq <= p.last {
		return false // late: a later one was heard already
	}
	if seq != p.last+1 {
		lost = p.ackedLost && p.last > 0
		for _, a := range p.acked {
			lost = lost || a > p.last && a < seq
		}
	}
	i := 0
	for i < len(p.acked) && p.acked[i] <= seq {
		i++
	}
	p.acked, p.ackedLost = p.acked[i:], false
	if lost && now.After(p.floor) {
		p.floor = now
	}
	if seq != p.last+1 || p.streak.IsZero() {
		p.streak = sent
	}
	p.last = seq
	p.beats++
	if sent.Sub(p.streak) >= p.grace && sent.After(p.proven) {
		p.proven = sent
	}
	return lost
}
