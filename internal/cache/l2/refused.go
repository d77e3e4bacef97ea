package l2

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// Raises Redis refused.
//
// A write's epoch raise can fail while Redis answers: an ACL without
// write access to the epoch keys, a read replica that took the master's
// address (READONLY), a script Redis will not run, a Redis before 7 over
// maxmemory under noeviction (later ones run the raise with allow-oom,
// epoch.go). The message of the same round trip usually goes out, so the
// peers drop their L1 copies, but L2 keeps the entry the write replaced
// readable on every replica, and the replay (internal/server) gives the tag
// up after a few tries: an error about a tag is no outage, and replaying
// it for ever would cost Redis a round trip of its size every max_lag/8.
//
// So a refused raise is handled as a lost message, which the proof already
// knows how to survive: the floor (heartbeat.go) is set at now, here and,
// through a Lost message, on every replica listening; and Redis's note of
// its instance (restart.go) takes the same floor, so a process started
// later adopts it too. Entries fetched before the floor are then served
// only while younger than max_lag, whatever their epochs say, and the
// entry the write replaced is older than that once max_lag has passed
// since the write's answer. The cost is one refetch of every entry older
// than max_lag, fleet-wide, per refusal (readiness says "unproven" for
// max_lag): a stale answer is not an option, and the refusals this covers
// are rare once OOM no longer causes them.
//
// The note is raised by a script flagged allow-oom, as the raise is; where
// even that is refused (READONLY, an ACL), a process started later reads
// no note of this instance's or cannot write one, and sets its floor at
// its start (restartFloor fails safe).

// raiseNoteScript raises the floor in Redis's note (restart.go) to Redis's
// clock, if the note names this instance. The flag line is added by
// raiseNote.
const raiseNoteScript = `
local rec = redis.call('GET', KEYS[1])
if not rec then return 0 end
local id = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')
local rid, rfloor = string.match(rec, '^(%w+) (%d+)$')
if rid ~= id then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now > tonumber(rfloor) then
  redis.call('SET', KEYS[1], id .. ' ' .. string.format('%.0f', now))
end
return 1`

// lostLogEvery bounds the warnings about refused raises (each replay of a
// refused tag, every max_lag/8, would log one): one per interval.
const lostLogEvery = 10 * time.Second

// epochsRefused handles raises that Redis answered with an error (see
// above); transport errors are an outage, which the heartbeats cover. A
// replay's refusal (ReplayTags: replay not zero, when its tags were
// queued) is not told again while one told after replay is younger than
// MaxLag/2 (retold); a write's own is told at once, always: an entry
// stored in L2 before that write may postdate the last one told.
func (s *Store) epochsRefused(ctx context.Context, cmds []*redis.Cmd, replay time.Time) {
	var cause error
	for _, c := range cmds {
		var rerr redis.Error
		if err := c.Err(); err != nil && errors.As(err, &rerr) {
			cause = err
			break
		}
	}
	if cause == nil {
		return
	}
	now := time.Now()
	s.proof.Gap(now)
	s.refusals.Add(1)
	if s.retold(now, replay) {
		return
	}
	if ok, n := s.lostLog.Allow(); ok {
		s.log.Warn("redis refused to raise a write's epoch: entries fetched before now need to be younger than max_lag on every replica", "err", cause, "suppressed", n)
	}
	msg, err := s.message(Invalidation{Lost: true})
	if err != nil {
		return
	}
	cctx, cancel := s.withTimeout(ctx)
	defer cancel()
	pipe := s.rdb.Pipeline()
	pub := s.publishIn(cctx, pipe, s.channel(), msg)
	if !s.isCluster() {
		src := "#!lua flags=allow-oom\n" + raiseNoteScript
		if s.legacyBump.Load() {
			src = raiseNoteScript
		}
		pipe.Eval(cctx, src, []string{s.key("run", "")})
	}
	_, err = pipe.Exec(cctx)
	s.done(ctx, err)
	if pub.Err() == nil {
		s.lostAt.Store(now.UnixNano())
	}
}

// retold reports whether a replay's refusal at now, of tags queued at
// replay, is covered by a Lost published after them and less than
// MaxLag/2 ago (epochsRefused); never for a write's own (replay zero).
func (s *Store) retold(now, replay time.Time) bool {
	if replay.IsZero() || s.opts.MaxLag <= 0 {
		return false
	}
	last := time.Unix(0, s.lostAt.Load())
	return last.After(replay) && now.Sub(last) < s.opts.MaxLag/2
}

// peerLost applies another replica's Lost message: the floor is now.
func (s *Store) peerLost(origin string) {
	if origin == s.origin {
		return // set when the raise was refused
	}
	s.proof.Gap(time.Now())
	if ok, n := s.peerLog.Allow(); ok {
		s.log.Warn("a peer's epoch raise was refused by redis: entries fetched before now need to be younger than max_lag", "suppressed", n)
	}
	s.deliver(Invalidation{All: true, Gap: true})
}

// Refusals counts the raises Redis refused here (epochsRefused).
func (s *Store) Refusals() uint64 { return s.refusals.Load() }
