package l2

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// Writes refused.
//
// Redis may answer every read and PING while it refuses every write
// (WritesRefused: MISCONF, NOREPLICAS, READONLY, OOM, BUSY). The breaker
// stays closed through it (PING passes, and an error reply about a
// command is no outage), so L2 reads go on; but no fill is stored and no
// epoch is raised, and readiness must say so (SPEC: "/readyz stays ready
// and reports L2 as degraded"), not "up". The store notes the first
// refusal any call meets (doneAt), and a write Redis takes ends it; while
// it lasts the probe tries one write every ProbeInterval (checkWrites), so
// a replica whose traffic writes nothing still sees Redis take writes
// again.
//
// Nor need a replica have written to see the refusal begin: the probe
// tries the same write whenever no write was taken within ProbeInterval
// (writesUnproven), so an idle replica, or one whose every read is a hit,
// stops saying "up" within one interval of Redis refusing writes. It said
// "up" for as long as it wrote nothing, PING and its heartbeats (TIME,
// PUBLISH: no write) passing. A replica that stores fills sends no probe
// write: its own writes tell.

// refusing records a refusal of writes (doneAt).
func (s *Store) refusing(err error) {
	if s.refusedAt.CompareAndSwap(0, time.Now().UnixNano()) {
		s.log.Warn("redis refuses writes: L2 stores nothing and raises no epoch until it takes them again", "err", err)
	}
}

// tookWrite records a write Redis took.
func (s *Store) tookWrite() {
	s.tookAt.Store(time.Now().UnixNano())
	if s.refusedAt.Load() != 0 && s.refusedAt.Swap(0) != 0 {
		s.log.Info("redis takes writes again")
	}
}

// writesUnproven reports whether the probe should try a write
// (checkWrites): Redis refuses writes, or took none within ProbeInterval.
func (s *Store) writesUnproven() bool {
	return s.refusedAt.Load() != 0 || time.Since(time.Unix(0, s.tookAt.Load())) >= s.opts.ProbeInterval
}

// WritesRefusedSince reports since when Redis has refused this store's
// writes while it answers (ok false: it takes them, as far as the last
// write or probe showed).
func (s *Store) WritesRefusedSince() (since time.Time, ok bool) {
	at := s.refusedAt.Load()
	if at == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, at), true
}

// checkWrites sends one write that changes nothing, SET XX of a key that
// does not exist, and records whether Redis took it: Redis refuses it as
// it refuses any write (its command flags say write and deny-oom), and
// takes it without creating the key. Only a refusal or a success tells:
// a transport error is the breaker's to count.
func (s *Store) checkWrites() {
	ctx, cancel := s.withTimeout(context.Background())
	defer cancel()
	err := s.rdb.SetXX(ctx, s.key("probe", ""), "", time.Millisecond).Err()
	switch {
	case err == nil || errors.Is(err, redis.Nil):
		s.done(context.Background(), nil) // an answer: no PING needed after it
		s.tookWrite()
	case WritesRefused(err):
		s.refusing(err) // begun now, or still
	default:
		s.done(context.Background(), err)
	}
}
