package invariant

import (
	"context"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/check"
)

// The redis-oom row: for a stretch of rounds mid-seed the replicas' Redis
// is over maxmemory under noeviction (maxmemory 1), so it refuses every
// command that may grow memory ("OOM command not allowed": stores,
// leases, plain scripts' SETs) while it still answers reads, PUBLISHes
// and deletes. Rounds go on through it with every check as before: no
// write undone past max_lag.
//
//   - Before the stretch a resource no round reads (oomProbe) is read
//     through both replicas, so L2 holds it; once Redis is over
//     maxmemory it is written through replica 0, which must answer 200.
//   - At the stretch's end, once max_lag (plus margin) has passed since
//     that write, a replica started then (no tombstone of the write's
//     message: it reads what L2 says) and the two read the probe: its
//     pre-write version is a max-lag violation. On f93bcf7 the epoch
//     raise was refused, the replay gave it up, and L2 served the
//     pre-write entry until its TTL (the prober's h13b_oom).
//   - The replica started then must prove its channel before it reads:
//     its /readyz says coherence proven, and l2 up or, as its probe's
//     write is refused too (OOM), degraded with the reason "writes
//     refused" (Checked counts oom-started-l2-<state>).
//   - Redis gets its memory back; every replica's /readyz must say l2 up
//     and coherence proven again within recoverWithin (redis-recover),
//     and a read of the probe answer 200.
//
// The stretch starts at half the rounds (plus 0-3, stream 42) and lasts
// 3-6 rounds, ending early before a crowd or queue round, whose budgets
// assume leases Redis would refuse.
const oomProbe = "/r/7"

// oomRow is the redis-oom row's state.
type oomRow struct {
	rng           *rand.Rand
	start, length int
	began         int  // the round after which Redis went over maxmemory
	on            bool // Redis is over maxmemory now
	done          bool
	wrote         time.Time // when the probe's write was answered
}

// redisOOM plays the row's step due after round.
func (r *run) redisOOM(ctx context.Context, round int) {
	if !r.cfg.Mix.Has("redis-oom") || r.cfg.RedisOOM == nil || r.cfg.Rounds < 40 {
		return
	}
	o := &r.oom
	if o.rng == nil { // the first round: the row's draws
		o.rng = rand.New(rand.NewPCG(r.cfg.Seed, 42))
		o.start = r.cfg.Rounds/2 + o.rng.IntN(4)
		o.length = 3 + o.rng.IntN(4)
	}
	special := r.crowdDue(round+1) || r.queueDue(round+1) || r.retryDue(round+1) || round+1 >= r.cfg.Rounds
	switch {
	case o.done:
	case !o.on && round >= o.start && !special:
		o.began, o.on = round, true
		r.oomBegin(ctx)
	case o.on && (round >= o.began+o.length || special):
		o.done = true
		r.oomEnd(ctx)
		o.on = false
	}
}

// oomBegin stores the probe in L2, puts Redis over maxmemory and writes
// the probe through replica 0.
func (r *run) oomBegin(ctx context.Context) {
	r.probe(ctx, 0, r.cfg.Replicas[0], http.MethodGet, oomProbe, "oom-probe-")
	time.Sleep(100 * time.Millisecond) // L2's store may follow the answer
	r.probe(ctx, 1, r.cfg.Replicas[1], http.MethodGet, oomProbe, "oom-probe-")
	time.Sleep(100 * time.Millisecond)
	if err := r.cfg.RedisOOM(ctx, true); err != nil {
		r.violate("harness", "redis over maxmemory: %v", err)
		r.oom.done, r.oom.on = true, false
		return
	}
	r.chk.Count("redis-oom", 1)
	r.patches++ // the probe's write reaches the origin (the runner's count of PATCHes)
	if st, _ := r.probe(ctx, 0, r.cfg.Replicas[0], http.MethodPatch, oomProbe, "oom-write-"); st != http.StatusOK {
		r.violate("harness", "the oom probe's write answered %d", st)
	}
	r.oom.wrote = check.Now()
}

// oomEnd reads the probe through a replica started now and the two, then
// gives Redis its memory back and waits for every replica to serve from
// it again.
func (r *run) oomEnd(ctx context.Context) {
	type target struct {
		base, admin string
		index       int
	}
	var targets []target
	if r.cfg.StartReplica != nil {
		// An index no write or purge names (nor the restart row's late
		// replica): max-lag only.
		proxy, admin := r.cfg.StartReplica()
		i := len(r.cfg.Replicas) + 2
		r.provenRefusing(ctx, i, admin) // Redis refuses its writes: OOM
		targets = append(targets, target{proxy, admin, i})
	}
	for i, base := range r.cfg.Replicas {
		a := ""
		if i < len(r.cfg.Admins) {
			a = r.cfg.Admins[i]
		}
		targets = append(targets, target{base, a, i})
	}
	time.Sleep(time.Until(r.oom.wrote.Add(r.cfg.MaxLag + r.cfg.LagMargin + 100*time.Millisecond)))
	for _, t := range targets {
		r.probe(ctx, t.index, t.base, http.MethodGet, oomProbe, "oom-read-")
	}
	if err := r.cfg.RedisOOM(ctx, false); err != nil {
		r.violate("harness", "redis memory back: %v", err)
		return
	}
	for _, t := range targets {
		if t.admin != "" {
			r.proven(ctx, t.index, t.admin)
		}
		if st, _ := r.probe(ctx, t.index, t.base, http.MethodGet, oomProbe, "oom-recovered-"); st != http.StatusOK {
			r.violate("redis-recover", "replica %d answered the oom probe %d once Redis had memory again", t.index, st)
		}
	}
}

// proven waits until replica i's /readyz (admin) says L2 up and
// coherence proven, for at most recoverWithin: past it, a redis-recover
// violation (recovered, with no restart to have heard of).
func (r *run) proven(ctx context.Context, i int, admin string) {
	r.recovered(ctx, i, admin, time.Time{})
}
