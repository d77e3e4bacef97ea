package l2

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Epochs Redis forgot: a restart from a snapshot (RDB or AOF) taken before
// some acknowledged writes brings back their tags' epochs as they were, so
// the entries those writes invalidated pass the read script again. A
// replica running through the restart loses its subscription and sets the
// floor (heartbeat.go), which refuses the entries fetched before it; a
// process started afterwards has no gap of its own to go by. So Redis
// keeps a note, P run, of the instance (INFO server run_id) its data was
// written on and the floor that instance started with; each replica reads
// it whenever its subscription is confirmed (at start and after a gap), in
// one script:
//
//   - the note names this instance: adopt its floor (a process started
//     after the restart refuses what the replicas running through it do);
//   - it names another: this Redis restarted from another's data, or a
//     read replica took over as master (a failover loses the epochs the
//     old master had not passed on): the floor is now, and so noted;
//   - there is none: the data predates the note, or it was evicted; the
//     floor is when this instance started (INFO server uptime_in_seconds),
//     which refuses whatever a snapshot it loaded holds. The uptime is
//     whole seconds between two truncated clock readings, so now - uptime
//     lies within a second of the start either way; subtracting one more
//     second, as this once did, put the floor up to two seconds early and
//     left entries fetched in those seconds before the restart proven.
//
// In Cluster each master restarts on its own and one key lives on one of
// them, so this check is not made there; see docs/coherence.md.
const restartScript = `
local info = redis.call('INFO', 'server')
local id = string.match(info, 'run_id:(%w+)')
local up = tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rec = redis.call('GET', KEYS[1])
local floor = now - up * 1000
if rec then
  local rid, rfloor = string.match(rec, '^(%w+) (%d+)$')
  if rid == id then return rfloor end
  floor = now
end
floor = string.format('%.0f', floor)
redis.call('SET', KEYS[1], id .. ' ' .. floor)
return floor`

var restartRedis = redis.NewScript(restartScript)

// restartFloor raises the floor to the one Redis's note gives (see above).
// It fails safe: when the script fails, the floor is now, as after a gap.
func (s *Store) restartFloor(ctx context.Context) {
	if s.isCluster() {
		return
	}
	cctx, cancel := s.withTimeout(ctx)
	defer cancel()
	v, err := restartRedis.Run(cctx, s.rdb, []string{s.key("run", "")}).Text()
	ms, perr := strconv.ParseInt(v, 10, 64)
	if err != nil || perr != nil {
		s.log.Warn("could not read which Redis the epochs were written on; older entries now need to be younger than max_lag", "err", err, "reply", v)
		s.proof.Gap(time.Now())
		return
	}
	if floor := s.localFloor(time.UnixMilli(ms)); floor.After(s.proof.Floor()) {
		s.proof.Gap(floor)
		s.log.Info("entries fetched before this floor now need to be younger than max_lag (redis's note of the instance its epochs were written on)", "floor", floor)
	}
}
