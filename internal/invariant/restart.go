package invariant

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/check"
	"github.com/sidecache/sidecache/internal/invariant/origin"
)

// The redis-restart row: the replicas' Redis is restarted mid-seed,
// between rounds, twice.
//
//   - At 3/8 of the rounds it is shut down without saving and started
//     empty on its port: every entry and epoch is gone. Every check goes
//     on as before (an empty Redis undoes no write: a missing epoch is a
//     miss); the replicas must serve again (recovered, below).
//   - At 5/8 a plain resource no round reads (probeSnapshot) is read through
//     both replicas, so L2 holds it, Redis SAVEs a snapshot, and the
//     resource is written through replica 0. At 3/4 Redis is killed and
//     started from that snapshot: the write's epoch raise, and every
//     other write's since the SAVE, is lost, and the pre-write entry is
//     back. docs/coherence.md ("When Redis loses epochs") promises only
//     max-lag for them: the replicas running through the restart set the
//     floor, and one started after it reads Redis's note (P run,
//     internal/cache/l2/restart.go) and sets it too, so an entry fetched
//     before the restart is served only while younger than max_lag. The
//     writes since the SAVE are held to max-lag only (check's Demote),
//     and once max_lag (plus margin) has passed since the probe's write,
//     a replica started after the restart, then the two, read the probe:
//     its pre-write version is a max-lag violation.
//
// Recovered: after each restart, every replica's /readyz must show a
// coherence_floor from after the restart began (it noticed) and say
// "l2":"up" and "coherence":"proven" again within recoverWithin, and
// the probe's reads answer 200 (redis-recover). Route s's held copies
// are forgotten across each restart (check's StartDrop).

// The probes are resources no round reads (rounds read ids 1-4): route
// r resources with the origin's default profile (plain, cacheable). The
// empty restart's reads use one, the snapshot's another, so the
// snapshot's probe is first read right before the SAVE: replica 0's
// fill, then replica 1's read (an L2 hit, or a fill of its own, kept
// even on an evicting Redis whose first fill of a new tag reads as a
// miss).
const (
	probeEmpty    = "/r/8"
	probeSnapshot = "/r/9"
)

// recoverWithin bounds how long a replica may take to serve again (L2
// up, its heartbeats proving coherence) once Redis answers: its
// subscription redials within a second, and the proof comes back ¾
// max_lag later; the rest is a loaded machine's margin.
const recoverWithin = 20 * time.Second

// restartStage is how far the row has come in the run.
type restartStage int

const (
	restartNone restartStage = iota
	restartedEmpty
	restartSaved
	restartedSnapshot
)

// restartRedis plays the row's step due at round (an ordinary round, at
// or after its point), between rounds.
func (r *run) restartRedis(ctx context.Context, round int) {
	if !r.cfg.Mix.Has("redis-restart") || r.cfg.RestartRedis == nil || r.cfg.SaveRedis == nil || r.cfg.Rounds < 40 {
		return
	}
	n := r.cfg.Rounds
	switch {
	case r.restartAt == restartNone && round >= n*3/8:
		r.restartAt = restartedEmpty
		r.restart(ctx, false)
	case r.restartAt == restartedEmpty && round >= n*5/8:
		r.restartAt = restartSaved
		r.snapshot(ctx)
	case r.restartAt == restartSaved && round >= n*3/4:
		r.restartAt = restartedSnapshot
		r.restart(ctx, true)
	}
}

// snapshot stores the probe in L2 (read through replica 0, then through
// replica 1: an L2 hit there shows it stored; else replica 1's own fill
// stored it), SAVEs, and writes the probe through replica 0.
func (r *run) snapshot(ctx context.Context) {
	r.probe(ctx, 0, r.cfg.Replicas[0], http.MethodGet, probeSnapshot, "restart-probe-")
	time.Sleep(100 * time.Millisecond) // L2's store may follow the answer
	if _, cs := r.probe(ctx, 1, r.cfg.Replicas[1], http.MethodGet, probeSnapshot, "restart-probe-"); !strings.Contains(cs, "l2") {
		r.chk.Count("restart-probe-refilled", 1)
		time.Sleep(100 * time.Millisecond)
	}
	r.saved = check.Now()
	if err := r.cfg.SaveRedis(ctx); err != nil {
		r.violate("harness", "redis SAVE: %v", err)
		r.saved = time.Time{}
		return
	}
	r.patches++ // the probe's write reaches the origin (the runner's count of PATCHes)
	if st, _ := r.probe(ctx, 0, r.cfg.Replicas[0], http.MethodPatch, probeSnapshot, "restart-write-"); st != http.StatusOK {
		r.violate("harness", "the restart probe's write answered %d", st)
	}
	r.wrote = check.Now()
}

// restart restarts Redis (from the snapshot, or empty), waits for the
// replicas to serve again, and after a snapshot restart reads the probe
// through a replica started after it and through the two.
func (r *run) restart(ctx context.Context, snapshot bool) {
	name := "empty"
	if snapshot {
		if r.saved.IsZero() {
			return
		}
		name = "snapshot"
		r.chk.Count("redis-restart-demoted", r.chk.Demote(r.saved))
	}
	r.chk.StartDrop()
	begin := time.Now()
	err := r.cfg.RestartRedis(ctx, snapshot)
	if err != nil {
		r.chk.EndDrop(check.Now())
		r.violate("harness", "redis restart (%s): %v", name, err)
		return
	}
	r.chk.Count("redis-restart-"+name, 1)
	for i, a := range r.cfg.Admins {
		r.recovered(ctx, i, a, begin)
	}
	r.chk.EndDrop(check.Now())
	type target struct {
		base  string
		index int
	}
	var targets []target
	if snapshot && r.cfg.StartReplica != nil {
		// Read first: a running replica's read refetches the probe and
		// stores the new version over the one the snapshot brought back.
		// Its index is one no write or purge names: max-lag only.
		proxy, admin := r.cfg.StartReplica()
		r.recovered(ctx, len(r.cfg.Replicas)+1, admin, begin)
		targets = append(targets, target{proxy, len(r.cfg.Replicas) + 1})
	}
	for i, base := range r.cfg.Replicas {
		targets = append(targets, target{base, i})
	}
	if snapshot {
		// The probe's write was answered before the restart; wait until
		// max_lag (plus margin) has passed since, so the lag check holds.
		time.Sleep(time.Until(r.wrote.Add(r.cfg.MaxLag + r.cfg.LagMargin + 100*time.Millisecond)))
	}
	path := probeEmpty
	if snapshot {
		path = probeSnapshot
	}
	for _, t := range targets {
		if st, _ := r.probe(ctx, t.index, t.base, http.MethodGet, path, "restart-read-"); st != http.StatusOK {
			r.violate("redis-recover", "replica %d answered the probe %d after the %s restart", t.index, st, name)
		}
	}
}

// recovered waits until replica i's /readyz (admin) shows it heard of
// the restart that began at since and serves from Redis again: a
// coherence_floor no earlier than a second before since (its
// subscription was rebuilt; on a replica started after the restart,
// Redis's note gave it one, or, with no note, the new instance's start,
// never more than a second early: internal/cache/l2/restart.go), L2 up and coherence
// proven; for at most recoverWithin: past it, a redis-recover
// violation. Without the floor a replica asked right after a quick
// restart would still show the state from before it.
func (r *run) recovered(ctx context.Context, i int, admin string, since time.Time) {
	var last string
	for deadline := time.Now().Add(recoverWithin); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(50 * time.Millisecond) {
		var ready struct {
			L2, Coherence string
			Floor         time.Time `json:"coherence_floor"`
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/readyz", nil)
		if err != nil {
			r.violate("harness", "replica %d: /readyz: %v", i, err)
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err.Error()
			continue
		}
		err = json.NewDecoder(resp.Body).Decode(&ready)
		resp.Body.Close()
		if err == nil && ready.L2 == "up" && ready.Coherence == "proven" && !ready.Floor.Before(since.Add(-time.Second)) {
			return
		}
		last = fmt.Sprintf("l2 %s, coherence %s, floor %v", ready.L2, ready.Coherence, ready.Floor)
	}
	r.violate("redis-recover", "replica %d not serving from Redis %v after its restart began at %v (/readyz: %s)", i, recoverWithin, since, last)
}

// probe sends method on path (a probe) through base as replica index,
// checks its answer as any other, counts its status under count, and
// returns the status and Cache-Status (0 when none came).
func (r *run) probe(ctx context.Context, index int, base, method, path, count string) (int, string) {
	q := r.gen.Probe(index, method, path, origin.Resource(path), index)
	req, err := r.gen.HTTPRequest(ctx, q, base)
	if err != nil {
		r.violate("harness", "%s: %v", q, err)
		return 0, ""
	}
	start := check.Now()
	resp, err := q.Who.Client.Do(req)
	if err != nil {
		r.violate("transport", "%s: %v", q, err)
		return 0, ""
	}
	body, err := check.ReadBody(resp)
	resp.Body.Close()
	end := check.Now()
	if err != nil {
		r.violate("garbled", "%s: %v", q, err)
		return 0, ""
	}
	r.chk.Count(count+resp.Status[:3], 1)
	r.chk.Answer(q, resp, body, start, end)
	return resp.StatusCode, resp.Header.Get("Cache-Status")
}
