package l2

import (
	"errors"
	"sync/atomic"
	"time"
)

// This replica's clock against Redis's.
//
// Epochs and entries are stamped by the replica that wrote them (epoch.go),
// and the read's test compares stamps of two replicas. On raw clocks a
// replica whose clock runs D ahead stamps its fills D late, so a fill
// fetched before a peer's write passes that write's epoch for D; one whose
// clock runs D behind raises epochs D early, below entries fetched before
// its write. Past max_lag either is a stale answer the proof does not see.
// NTP keeps clocks within milliseconds; a replica whose NTP broke is what
// this catches, cheaply: each heartbeat (every max_lag/4) reads Redis's
// TIME in its own round trip, and the offset between that and the middle
// of the round trip, less half the round trip (what the measure cannot
// tell), is this clock's error against Redis's.
//
// While it is over max_lag/4 (a quarter of the budget: the promise also
// spends max_lag on the proof and the replay) the replica is skewed: it
// neither reads nor stores L2 entries (ErrSkewed, counted as L2 errors),
// its proof is withheld (Proven is zero, so L1 serves only entries younger
// than max_lag by its own clock, consistent with itself), /readyz says
// "clock":"skewed", and a warning is logged at most every lostLogEvery.
// Its writes still raise epochs, at the later of its clock and Redis's as
// measured: refusing more, never less. It is judged well again once the
// offset plus half the round trip is within max_lag/4; a round trip too
// slow to tell either way leaves the judgement as it was.
//
// Under the threshold the skew is corrected rather than trusted: every
// stamp the read's test compares is written on Redis's clock as measured,
// so that two replicas' stamps compare as Redis's clock saw them. Before
// this a skew D under max_lag/4 let a fill begun up to D before a write
// (a filler D ahead, or a writer D behind) carry a later stamp than the
// write's epoch and pass it until its TTL (TestStampsOnRedisClock). The
// measure is off by at most half its round trip plus TIME's microsecond
// (its error, err below), and each conversion takes the side of that
// error which refuses more: an entry's stamp is the earliest Redis time
// its request may have left at (redisStamp), an epoch the latest Redis
// time its write may have run at (epochNow), a floor Redis gave the
// latest local time it may stand for (localFloor). So the error costs
// misses, never a stale answer; a slow round trip widens it until the
// next beat (a beat taking 1 s makes misses of fills begun up to half a
// second after a write, more if the writer's was slow too).
// The entry's codec bytes keep the filler's StoredAt as it was: ages and
// freshness read it as before, and decoding the same bytes twice gives
// the same time (WaitFill tells the copy a waiter holds by it), which a
// conversion by the reader's offset, moving a few microseconds each beat,
// would not. Until a beat has measured, the offset and error are 0: the
// local clock, as before.
//
// Redis's clock is the reference because every replica already talks to
// it; a Redis whose own clock is off by more than max_lag/4 makes every
// replica skewed, which costs L2 and says so, rather than trusting clocks
// nobody checked.

// ErrSkewed is returned by reads and stores while this replica's clock is
// off Redis's by more than MaxLag/4.
var ErrSkewed = errors.New("l2: clock skewed against redis")

// clockSkew is what the heartbeat measured.
type clockSkew struct {
	offset atomic.Int64 // Redis's clock less this one, ns, at the last measure
	err    atomic.Int64 // how far offset may be off, ns: half the round trip and TIME's µs
	skewed atomic.Bool
}

// measureSkew judges this clock from one round trip: sent and back are
// this clock's readings around it, redis the TIME Redis answered.
func (s *Store) measureSkew(sent, back, redis time.Time) {
	if s.opts.MaxLag <= 0 {
		return
	}
	half := back.Sub(sent) / 2
	off := redis.Sub(sent.Add(half))
	s.skew.offset.Store(int64(off))
	s.skew.err.Store(int64(half + time.Microsecond))
	abs := off.Abs()
	bound := s.opts.MaxLag / 4
	switch {
	case abs-half > bound:
		s.skew.skewed.Store(true)
		if ok, n := s.skewLog.Allow(); ok {
			s.log.Warn("clock off redis's by more than max_lag/4: not reading or storing l2, proof withheld", "offset", off, "bound", bound, "suppressed", n)
		}
	case abs+half <= bound:
		if s.skew.skewed.Swap(false) {
			s.log.Info("clock agrees with redis's again", "offset", off)
		}
	}
}

// Skewed reports whether this replica's clock is off Redis's by more than
// MaxLag/4 (see above).
func (s *Store) Skewed() bool { return s.skew.skewed.Load() }

// ClockOffset is Redis's clock less this replica's, at the last heartbeat.
func (s *Store) ClockOffset() time.Duration { return time.Duration(s.skew.offset.Load()) }

// epochNow is the time an invalidation raises epochs to: the latest time
// Redis's clock may read now, as measured (see above). A skewed clock ahead
// of Redis's raises them to its own reading, later still: refusing more,
// never less.
func (s *Store) epochNow() time.Time {
	now := s.opts.clock()
	r := now.Add(s.ClockOffset() + time.Duration(s.skew.err.Load()))
	if s.skew.skewed.Load() && now.After(r) {
		return now
	}
	return r
}

// redisStamp is local time t (an entry's StoredAt) as the earliest time
// Redis's clock may have read then; the zero time stays zero.
func (s *Store) redisStamp(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(s.ClockOffset() - time.Duration(s.skew.err.Load()))
}

// localFloor is a time read on Redis's clock (a floor it noted) as the
// latest local time it may stand for.
func (s *Store) localFloor(t time.Time) time.Time {
	return t.Add(time.Duration(s.skew.err.Load()) - s.ClockOffset())
}

// usable is admit for reads and stores of entries: also refused while
// skewed.
func (s *Store) usable() error {
	if err := s.admit(); err != nil {
		return err
	}
	if s.skew.skewed.Load() {
		return ErrSkewed
	}
	return nil
}
