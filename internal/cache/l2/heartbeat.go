package l2

import (
	"context"
	"sync"
	"time"
)

// Proof that the invalidation channel works.
//
// A replica cannot hear an invalidation that Redis does not deliver: while
// Redis is paused, down or partitioned away, a peer's write may be answered
// to its client and this replica's L1 (and L2, whose epochs the peer could
// not raise) keeps the old version. So each replica publishes its own
// heartbeat every MaxLag/4 on its own beat channel, P beat:<origin>, which
// it subscribes on the same connection as the invalidation channel, and
// watches for it to come back. Redis runs PUBLISHes one at a time and
// appends each delivery to the subscribing connection's output in that
// order, whatever the channel; the subscriber applies each invalidation
// before it reads the next message; so once a heartbeat sent at time h is
// back, every invalidation published before h has been applied here.
// Proven returns the latest such h. The cache tiers use it to stop serving
// entries older than coherence.max_lag while the proof is older than that
// (cache.Tiered).
//
// A replica hears only its own beats, never its peers': each receives 4
// beats a second and the invalidations, whatever the fleet's size N, where
// beats on the shared channel cost every replica 4·N messages a second and
// Redis 4·N² deliveries (docs/coherence.md has the figures). A peer's beat
// proved nothing here anyway: only this replica's own beat, published on a
// path that can fail on its own, tells that this replica's channel works.
// Replicas of the previous release still beat on the shared channel; a
// beat on the shared channel is ignored.
//
// After a gap (a heartbeat lost, the subscription rebuilt) the proof does
// not advance until heartbeats have come back for proofGrace (3/4 MaxLag)
// in a row: a peer whose invalidation failed meanwhile retries it every
// MaxLag/8 (internal/server), each attempt bounded by two Timeouts, and
// must have had the time to do so. That holds while Timeout < 5/16 MaxLag
// (100 ms and 1 s by default).
//
// A rebuilt subscription also sets the floor (Floor): invalidations
// published while it was down are lost, so the proof covers only entries
// whose request left after the new subscription was confirmed. Older
// entries stay in L1 and are served while they are younger than MaxLag,
// which needs no proof (cache.Tiered), instead of L1 being emptied.

// Beat is one heartbeat: its sequence number and when it was sent (unix
// ns, on the sender's clock; only the sender reads it).
type Beat struct {
	Seq  uint64 `json:"seq"`
	Sent int64  `json:"sent"`
}

// proof is what the subscriber learns from this replica's heartbeats.
type proof struct {
	mu     sync.Mutex
	last   uint64    // the last sequence number heard
	streak time.Time // when the first beat of the current unbroken run was sent
	proven time.Time
	floor  time.Time // when the current subscription was confirmed after a gap
	beats  uint64    // own beats heard, for Proof
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

// maxAcked bounds proof.acked: 16 s of beats at the default max_lag that
// never came back. Past it a skip in the sequence counts as a loss.
const maxAcked = 64

// Proof is the state of this replica's proof that it hears the channel,
// for /readyz and tests.
type Proof struct {
	// Proven: every invalidation published before it has been applied
	// here (zero: never proven).
	Proven time.Time
	// Floor: entries whose request left before it are not covered by
	// Proven (messages may have been lost before the subscription it
	// dates was confirmed). Zero: no gap since New.
	Floor time.Time
	// Beats counts this replica's own heartbeats that came back.
	Beats uint64
}

// proofGrace is how long heartbeats must come back in a row after a gap
// before they prove anything again.
func (s *Store) proofGrace() time.Duration { return s.opts.MaxLag * 3 / 4 }

// Proven is the send time of the latest heartbeat that came back to this
// replica (see above); the zero time before the first, or when MaxLag is 0
// (no heartbeats).
func (s *Store) Proven() time.Time {
	s.proof.mu.Lock()
	defer s.proof.mu.Unlock()
	return s.proof.proven
}

// Floor is Proof().Floor: entries whose request left before it are covered
// by Proven only while younger than MaxLag.
func (s *Store) Floor() time.Time {
	s.proof.mu.Lock()
	defer s.proof.mu.Unlock()
	return s.proof.floor
}

// Proof returns the proof's state.
func (s *Store) Proof() Proof {
	p := &s.proof
	p.mu.Lock()
	defer p.mu.Unlock()
	return Proof{Proven: p.proven, Floor: p.floor, Beats: p.beats}
}

// gap records that the subscription was rebuilt and confirmed at t.
func (s *Store) gap(t time.Time) {
	p := &s.proof
	p.mu.Lock()
	defer p.mu.Unlock()
	if t.After(p.floor) {
		p.floor = t
	}
}

// sendingBeat records that heartbeat seq is about to be published.
func (s *Store) sendingBeat(seq uint64) {
	p := &s.proof
	p.mu.Lock()
	p.sending = seq
	p.mu.Unlock()
}

// published records that the master acknowledged heartbeat seq.
func (s *Store) published(seq uint64) {
	p := &s.proof
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

// unheard is how many of this replica's beats the master acknowledged
// that have not come back (at least maxAcked once some were forgotten).
func (s *Store) unheard() int {
	p := &s.proof
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ackedLost {
		return maxAcked
	}
	return len(p.acked)
}

// forgetAcked is called when a subscription is confirmed: beats published
// before it may not reach it, and their loss is the gap's (Floor), not
// one that heard should report.
func (s *Store) forgetAcked() {
	p := &s.proof
	p.mu.Lock()
	defer p.mu.Unlock()
	p.acked, p.ackedLost = nil, false
	p.forgot = p.sending
}

// heard records one of this replica's heartbeats coming back, at now. It
// reports whether a beat published before it was acknowledged by the
// master and never came back on a subscription that stayed up: Redis
// delivers on a connection in the order it ran the PUBLISHes, and beats are
// published one after another, so such a beat was lost on the way, and the
// invalidations published around it may have been too. That happens on a
// read replica that resynchronised in full (relay.go), and nowhere else
// without the connection closing; it then sets the floor at now, as a
// rebuilt subscription does (see gap).
func (s *Store) heard(b Beat, now time.Time) (lost bool) {
	p := &s.proof
	p.mu.Lock()
	defer p.mu.Unlock()
	if b.Seq <= p.last {
		return false // late: a later one was heard already
	}
	sent := time.Unix(0, b.Sent)
	if b.Seq != p.last+1 {
		lost = p.ackedLost && p.last > 0
		for _, a := range p.acked {
			lost = lost || a > p.last && a < b.Seq
		}
	}
	i := 0
	for i < len(p.acked) && p.acked[i] <= b.Seq {
		i++
	}
	p.acked, p.ackedLost = p.acked[i:], false
	if lost && now.After(p.floor) {
		p.floor = now
	}
	if b.Seq != p.last+1 || p.streak.IsZero() {
		p.streak = sent
	}
	p.last = b.Seq
	p.beats++
	if sent.Sub(p.streak) >= s.proofGrace() && sent.After(p.proven) {
		p.proven = sent
	}
	return lost
}

// heartbeat publishes a Beat on this replica's beat channel every MaxLag/4
// until Close. It ignores the
// breaker: the beats coming back are how this replica learns that the
// channel works again. A beat that fails is not retried; the next one has
// the next number, and the gap restarts the streak.
func (s *Store) heartbeat() {
	defer s.wg.Done()
	if s.opts.MaxLag <= 0 {
		return
	}
	t := time.NewTicker(max(s.opts.MaxLag/4, time.Millisecond))
	defer t.Stop()
	var seq uint64
	for {
		seq++
		ctx, cancel := s.withTimeout(context.Background())
		s.sendingBeat(seq)
		if s.publishOn(ctx, s.beatChannel(), Invalidation{Beat: &Beat{Seq: seq, Sent: time.Now().UnixNano()}}) == nil {
			s.published(seq)
		}
		cancel()
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}
