package invariant

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/check"
)

// The redis-refuses-writes row: once a seed, between rounds, the
// replicas' Redis refuses every write while it answers — a master short
// of the replicas min-replicas-to-write asks for (NOREPLICAS), as a
// failed snapshot does (MISCONF) — refusing the epoch raise and the
// note's raise (internal/cache/l2's restart.go) alike, while GET, MGET,
// TIME and PUBLISH still run: every replica's heartbeats come back.
//
//   - A resource no round reads (refuseProbe) is read through both
//     replicas, so L2 holds it; once Redis refuses writes it is written
//     through replica 0, which must answer 200.
//   - Past the replay's tries (5 × max_lag after that answer), Redis
//     takes writes again, and a replica started then (a rolling deploy:
//     no tombstone, no floor of the refusal's message; it reads Redis's
//     note) and the two read the probe: its pre-write version is a
//     max-lag violation. Before the fix the replay counted each refusal
//     as a try about the tag and gave it up after maxTries, nothing
//     raised the epoch once Redis took writes again, and the new replica,
//     which adopted the note's old floor, served the pre-write entry from
//     L2 until its TTL.
//   - Replica 0, whose write Redis refused, must say so on /readyz (200,
//     l2 degraded, reason "writes refused") within recoverWithin
//     (readyz-refused): it said "up", PING passing.
//   - Every replica's /readyz must say l2 up and coherence proven again
//     within recoverWithin (redis-recover), and a read of the probe answer
//     200.
//
// It runs after a round drawn from a fifth of the rounds on (plus 0-3,
// stream 48), in runs of 40 rounds or more, with no round's traffic
// during it (the oom row plays the rounds through its stretch).
const refuseProbe = "/r/6"

// refuseRow is the redis-refuses-writes row's state.
type refuseRow struct {
	rng  *rand.Rand
	at   int
	done bool
}

// redisRefuse plays the row after round, if it is due.
func (r *run) redisRefuse(ctx context.Context, round int) {
	if !r.cfg.Mix.Has("redis-refuses-writes") || r.cfg.RefuseWrites == nil || r.cfg.StartReplica == nil || r.cfg.Rounds < 40 {
		return
	}
	o := &r.refuse
	if o.rng == nil { // the first round: the row's draws
		o.rng = rand.New(rand.NewPCG(r.cfg.Seed, 48))
		o.at = r.cfg.Rounds/5 + o.rng.IntN(4)
	}
	if o.done || round < o.at {
		return
	}
	o.done = true
	r.probe(ctx, 0, r.cfg.Replicas[0], http.MethodGet, refuseProbe, "refuse-probe-")
	time.Sleep(100 * time.Millisecond) // L2's store may follow the answer
	r.probe(ctx, 1, r.cfg.Replicas[1], http.MethodGet, refuseProbe, "refuse-probe-")
	time.Sleep(100 * time.Millisecond)
	if err := r.cfg.RefuseWrites(ctx, true); err != nil {
		r.violate("harness", "redis refusing writes: %v", err)
		return
	}
	r.chk.Count("redis-refuses-writes", 1)
	r.refusedIdle(ctx)
	r.patches++ // the probe's write reaches the origin (the runner's count of PATCHes)
	if st, _ := r.probe(ctx, 0, r.cfg.Replicas[0], http.MethodPatch, refuseProbe, "refuse-write-"); st != http.StatusOK {
		r.violate("harness", "the refusal probe's write answered %d", st)
	}
	wrote := check.Now()
	if len(r.cfg.Admins) > 0 {
		r.writesRefusedNamed(ctx, 0, "readyz-refused", "of Redis refusing its write")
	}
	// Past the replay's last try had it counted these refusals (maxTries
	// replays, max_lag/2 apart while Redis takes no write).
	time.Sleep(time.Until(wrote.Add(5*r.cfg.MaxLag + r.cfg.LagMargin)))
	if err := r.cfg.RefuseWrites(ctx, false); err != nil {
		r.violate("harness", "redis taking writes again: %v", err)
		return
	}
	type target struct {
		base, admin string
		index       int
	}
	// An index no write or purge names (nor the restart row's late
	// replica, the oom row's nor the retag row's): max-lag only.
	proxy, admin := r.cfg.StartReplica()
	targets := []target{{proxy, admin, len(r.cfg.Replicas) + 4}}
	for i, base := range r.cfg.Replicas {
		a := ""
		if i < len(r.cfg.Admins) {
			a = r.cfg.Admins[i]
		}
		targets = append(targets, target{base, a, i})
	}
	for _, t := range targets {
		if t.admin != "" {
			r.proven(ctx, t.index, t.admin)
		}
		if st, _ := r.probe(ctx, t.index, t.base, http.MethodGet, refuseProbe, "refuse-read-"); st != http.StatusOK {
			r.violate("redis-recover", "replica %d answered the refusal probe %d once Redis took writes again", t.index, st)
		}
	}
}

// The readyz-refused-idle row (PCG stream 68): in the
// redis-refuses-writes row, once Redis refuses writes and before replica
// 0's write, a replica drawn among the others, which has sent Redis no
// write since (the probe's reads before the refusal were L2 hits or
// stored before it), must say so too: /readyz 200, l2 degraded, reason
// "writes refused", within recoverWithin, and then
// sidecache_l2_writes_refused 1 beside sidecache_l2_up 1 on its
// /metrics (readyz-refused-idle). It said "up": only a refused write of
// its own told a replica, and PING and the heartbeats (TIME, PUBLISH)
// pass.
func (r *run) refusedIdle(ctx context.Context) {
	if !r.cfg.Mix.Has("readyz-refused-idle") || len(r.cfg.Replicas) < 2 || len(r.cfg.Admins) != len(r.cfg.Replicas) {
		return
	}
	i := 1 + rand.New(rand.NewPCG(r.cfg.Seed, 68)).IntN(len(r.cfg.Replicas)-1)
	if !r.writesRefusedNamed(ctx, i, "readyz-refused-idle", "of Redis refusing writes, with no write of its own") {
		return
	}
	gauge := func(name string) (float64, error) {
		return readCounter(ctx, r.cfg.Admins[i], func(line string) bool { return strings.HasPrefix(line, name+" ") })
	}
	refused, err := gauge("sidecache_l2_writes_refused")
	up, err2 := gauge("sidecache_l2_up")
	if err != nil || err2 != nil {
		r.violate("harness", "replica %d: /metrics: %v %v", i, err, err2)
		return
	}
	if refused != 1 || up != 1 {
		r.violate("readyz-refused-idle", "replica %d: /readyz names writes refused, /metrics says sidecache_l2_writes_refused %v, sidecache_l2_up %v (want 1 and 1: Redis answers)", i, refused, up)
	}
}

// writesRefusedNamed waits until the /readyz of replica i, which met
// Redis's refusal of writes, answers 200 naming L2 degraded with the
// reason "writes refused", for at most recoverWithin (since what names
// when the wait began), and reports whether it did: past it, a kind
// violation.
func (r *run) writesRefusedNamed(ctx context.Context, i int, kind, since string) bool {
	admin := r.cfg.Admins[i]
	var last string
	for deadline := time.Now().Add(recoverWithin); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(50 * time.Millisecond) {
		var ready struct{ L2, Reason string }
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/readyz", nil)
		if err != nil {
			r.violate("harness", "replica %d: /readyz: %v", i, err)
			return false
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err.Error()
			continue
		}
		err = json.NewDecoder(resp.Body).Decode(&ready)
		resp.Body.Close()
		if err == nil && resp.StatusCode == http.StatusOK && ready.L2 == "degraded" && ready.Reason == "writes refused" {
			r.chk.Count(kind, 1)
			return true
		}
		last = fmt.Sprintf("%d, l2 %q, reason %q", resp.StatusCode, ready.L2, ready.Reason)
	}
	r.violate(kind, "replica %d's /readyz did not name L2 degraded, writes refused, within %v %s (%s)", i, recoverWithin, since, last)
	return false
}
