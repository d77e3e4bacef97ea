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
// heartbeat on the channel every MaxLag/4 and watches for it to come back.
// Redis delivers a channel's messages in the order it ran the PUBLISHes,
// and the subscriber applies each invalidation before it reads the next
// message; so once a heartbeat sent at time h is back, every invalidation
// published before h has been applied here. Proven returns the latest such
// h. The cache tiers use it to stop serving entries older than
// coherence.max_lag while the proof is older than that (cache.Tiered).
//
// After a gap (a heartbeat lost, the subscription rebuilt) the proof does
// not advance until heartbeats have come back for proofGrace (3/4 MaxLag)
// in a row: a peer whose invalidation failed meanwhile retries it every
// MaxLag/8 (internal/server), each attempt bounded by two Timeouts, and
// must have had the time to do so. That holds while Timeout < 5/16 MaxLag
// (100 ms and 1 s by default).

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

// heard records one of this replica's heartbeats coming back.
func (s *Store) heard(b Beat) {
	p := &s.proof
	p.mu.Lock()
	defer p.mu.Unlock()
	if b.Seq <= p.last {
		return // late: a later one was heard already
	}
	sent := time.Unix(0, b.Sent)
	if b.Seq != p.last+1 || p.streak.IsZero() {
		p.streak = sent
	}
	p.last = b.Seq
	if sent.Sub(p.streak) >= s.proofGrace() && sent.After(p.proven) {
		p.proven = sent
	}
}

// heartbeat publishes a Beat every MaxLag/4 until Close. It ignores the
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
		_ = s.publish(ctx, Invalidation{Beat: &Beat{Seq: seq, Sent: time.Now().UnixNano()}})
		cancel()
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}
