package l2

import (
	"context"
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
// The bookkeeping is internal/cache/l2/proof's (Tracker); its rules:
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
	// Skewed: this replica's clock is off Redis's by more than MaxLag/4
	// (skew.go); Proven is then zero.
	Skewed bool
}

// proofGrace is how long heartbeats must come back in a row after a gap
// before they prove anything again.
func proofGrace(o Options) time.Duration { return o.MaxLag * 3 / 4 }

// Proven is the send time of the latest heartbeat that came back to this
// replica (see above); the zero time before the first, when MaxLag is 0
// (no heartbeats), or while this replica's clock is skewed (skew.go).
func (s *Store) Proven() time.Time {
	if s.skew.skewed.Load() {
		return time.Time{}
	}
	return s.proof.Proven()
}

// Floor is Proof().Floor: entries whose request left before it are covered
// by Proven only while younger than MaxLag.
func (s *Store) Floor() time.Time {
	return s.proof.Floor()
}

// Proof returns the proof's state.
func (s *Store) Proof() Proof {
	p := s.proof.State()
	out := Proof{Proven: p.Proven, Floor: p.Floor, Beats: p.Beats, Skewed: s.skew.skewed.Load()}
	if out.Skewed {
		out.Proven = time.Time{}
	}
	return out
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
		s.proof.Sending(seq)
		if s.beat(seq) {
			s.proof.Published(seq)
		}
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

// beat publishes heartbeat seq and reads Redis's clock in the same round
// trip (skew.go), reporting whether Redis took the beat.
func (s *Store) beat(seq uint64) bool {
	msg, err := s.message(Invalidation{Beat: &Beat{Seq: seq, Sent: time.Now().UnixNano()}})
	if err != nil {
		return false
	}
	ctx, cancel := s.withTimeout(context.Background())
	defer cancel()
	pipe := s.rdb.Pipeline()
	tm := pipe.Time(ctx)
	pub := s.publishIn(ctx, pipe, s.beatChannel(), msg)
	sent := s.opts.clock()
	_, err = pipe.Exec(ctx)
	back := s.opts.clock()
	s.done(ctx, err) // as before: a beat past its own deadline is not counted
	if tm.Err() == nil {
		s.measureSkew(sent, back, tm.Val())
	}
	return pub.Err() == nil
}
