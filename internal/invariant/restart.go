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
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// The redis-restart row: the replicas' Redis is restarted mid-seed,
// twice, each time in the middle of a round's traffic.
//
//   - In the first ordinary round from 3/8 of the rounds on it is shut
//     down without saving and started empty on its port: every entry and
//     epoch is gone. Every check goes on as before (an empty Redis undoes
//     no write: a missing epoch is a miss); the replicas must serve again
//     (recovered, below).
//   - At 5/8, between rounds, a plain resource no round reads
//     (probeSnapshot) is read through both replicas, so L2 holds it,
//     Redis SAVEs a snapshot, and the resource is written through replica
//     0. In the first ordinary round from 3/4 on Redis is killed and
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
// Where in the round (stream 38, restartDraw): of the round's n
// requests, the first k (k drawn from 0 to n) are sent at once, and
// Redis goes down once j of their answers came (j from 0 to k): the
// others are in flight across the restart, their fills fetched before it
// and stored, if at all, after. The last n-k are sent once Redis is down
// (reads failing L2, writes whose invalidation Redis cannot take), and
// Redis comes back once they are answered. The checks hold throughout:
// a write acknowledged from the moment Redis goes down until every
// replica has published the invalidations it replays (its
// sidecache_invalidation_replay_pending back at 0) is held from then on,
// to max-lag only (check's StartOutage, EndOutage: such a write's
// answer may have gone out at coherence.write_hold, with its bound
// counted from the replay's publish, docs/configuration.md); every other
// write as before. What is asserted is what the answers and counters
// show, never how long anything took: the outage ends with the requests
// sent during it, not at a time.
//
// Recovered: after each restart, every replica's /readyz must show a
// coherence_floor from after the restart began (it noticed) and say
// "l2":"up" and "coherence":"proven" again within recoverWithin, its
// replayed invalidations must all be published within it, and the
// probe's reads after the round answer 200 (redis-recover). Route s's
// held copies are forgotten across each restart (check's StartDrop).

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

// restartDraw is a Redis restart a round plays among its requests
// (mid.go): Redis goes down once before of the first requests' answers
// came, the rest go once it is down, and it is started again once they
// were answered (or after downFor).
type restartDraw struct {
	*midSplit
	snapshot bool
	begin    time.Time
	ok       bool // restarted, and every replica serves again
}

// downFor bounds how long Redis stays down for the requests sent during
// the outage: a write waits coherence.write_hold (max_lag) for its
// invalidation, a read fails L2 fast; a request answered later still
// is answered with Redis back.
const downFor = 5 * time.Second

func (d *restartDraw) play(ctx context.Context, r *run) { r.restartIn(ctx, d) }

// drawRestart returns the Redis restart due in this round (an ordinary
// round, at or after its point), and where among reqs it falls (stream
// 38), or nil. The row's SAVE and the reads after a restart are between
// rounds (restartRedis).
func (r *run) drawRestart(round int, reqs []*traffic.Request) *restartDraw {
	if !r.restartOn() {
		return nil
	}
	n := r.cfg.Rounds
	var d *restartDraw
	switch {
	case r.restartAt == restartNone && round >= n*3/8:
		r.restartAt = restartedEmpty
		d = &restartDraw{}
	case r.restartAt == restartSaved && round >= n*3/4 && !r.saved.IsZero():
		r.restartAt = restartedSnapshot
		d = &restartDraw{snapshot: true}
	default:
		return nil
	}
	d.midSplit = newMidSplit(r.restarts, reqs)
	r.chk.Count("redis-restart-held", len(reqs)-d.first)
	return d
}

// restartOn reports whether the row runs: its hooks are set and the run
// is long enough for its three steps (40 rounds).
func (r *run) restartOn() bool {
	return r.cfg.Mix.Has("redis-restart") && r.cfg.RestartRedis != nil && r.cfg.SaveRedis != nil && r.cfg.Rounds >= 40
}

// restartRedis plays what the row does between rounds after round: the
// reads that follow a restart the round played, and the snapshot step.
func (r *run) restartRedis(ctx context.Context, round int) {
	if d := r.restarted; d != nil {
		r.restarted = nil
		if d.ok {
			r.readAfterRestart(ctx, d)
		}
	}
	if !r.restartOn() {
		return
	}
	if r.restartAt == restartedEmpty && round >= r.cfg.Rounds*5/8 {
		r.restartAt = restartSaved
		r.snapshot(ctx)
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

// restartIn plays d among its round's requests, on the round's own
// goroutine: once d.before answers came, the checks enter the outage
// (after a snapshot restart the writes acknowledged since the SAVE are
// held to max-lag only; those acknowledged from now on wait for the
// replay: check.StartOutage) and forget route s's held copies, Redis goes
// down (killed, or shut down without saving), the held requests go and
// are answered, and Redis is started again (from the snapshot, or
// empty). Then every replica must serve from it again (recovered) and
// publish what it replays: only then are the writes acknowledged during
// the outage held, from then on (check.EndOutage).
func (r *run) restartIn(ctx context.Context, d *restartDraw) {
	defer d.goDown()
	if !d.awaitBefore(ctx) {
		return
	}
	name := "empty"
	if d.snapshot {
		name = "snapshot"
	}
	r.chk.Count("redis-restart-demoted", r.chk.StartOutage(d.snapshot, r.saved))
	r.chk.StartDrop()
	d.begin = time.Now()
	err := r.cfg.RestartRedis(ctx, d.snapshot, func() {
		d.goDown()
		d.awaitHeld(r, downFor, "redis-restart-during")
	})
	if err != nil {
		r.chk.EndOutage(check.Now())
		r.chk.EndDrop(check.Now())
		r.violate("harness", "redis restart (%s): %v", name, err)
		return
	}
	r.chk.Count("redis-restart-"+name, 1)
	for i, a := range r.cfg.Admins {
		r.recovered(ctx, i, a, d.begin)
	}
	r.replayedAll(ctx) // stall.go
	now := check.Now()
	r.chk.Count("redis-restart-deferred", r.chk.EndOutage(now))
	r.chk.EndDrop(now)
	d.ok = true
}

// replayed waits until replica i (admin) has no invalidation left to
// replay (sidecache_invalidation_replay_pending 0): what it could not
// publish while Redis was down is published. For at most recoverWithin:
// past it, a redis-recover violation.
func (r *run) replayed(ctx context.Context, i int, admin string) {
	var last float64
	for deadline := time.Now().Add(recoverWithin); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(20 * time.Millisecond) {
		n, err := readCounter(ctx, admin, func(line string) bool {
			return strings.HasPrefix(line, "sidecache_invalidation_replay_pending ") || strings.HasPrefix(line, "sidecache_invalidation_replay_pending{")
		})
		if err != nil {
			r.violate("harness", "replica %d: /metrics: %v", i, err)
			return
		}
		if n == 0 {
			return
		}
		last = n
	}
	r.violate("redis-recover", "replica %d still had %v invalidations to replay %v after Redis came back", i, last, recoverWithin)
}

// readAfterRestart reads a probe once the round that restarted Redis is
// over: after the empty restart probeEmpty through every replica; after
// the snapshot restart probeSnapshot, through a replica started after it
// first, then through the others, once max_lag (plus margin) has passed
// since the probe's write.
func (r *run) readAfterRestart(ctx context.Context, d *restartDraw) {
	type target struct {
		base  string
		index int
	}
	var targets []target
	if d.snapshot && r.cfg.StartReplica != nil {
		// Read first: a running replica's read refetches the probe and
		// stores the new version over the one the snapshot brought back.
		// Its index is one no write or purge names: max-lag only.
		proxy, admin := r.cfg.StartReplica()
		r.recovered(ctx, len(r.cfg.Replicas)+1, admin, d.begin)
		targets = append(targets, target{proxy, len(r.cfg.Replicas) + 1})
	}
	for i, base := range r.cfg.Replicas {
		targets = append(targets, target{base, i})
	}
	name, path := "empty", probeEmpty
	if d.snapshot {
		name, path = "snapshot", probeSnapshot
		// The probe's write was answered before the restart; wait until
		// max_lag (plus margin) has passed since, so the lag check holds.
		time.Sleep(time.Until(r.wrote.Add(r.cfg.MaxLag + r.cfg.LagMargin + 100*time.Millisecond)))
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
// restart would still show the state from before it. A zero since asks
// for no floor (proven).
func (r *run) recovered(ctx context.Context, i int, admin string, since time.Time) {
	r.recoveredAs(ctx, i, admin, since, false)
}

// provenRefusing is proven for a replica started while Redis refuses
// writes (the redis-oom row's): its /readyz may name L2 degraded for
// that reason alone ("writes refused": Redis answers, so it reads L2),
// as it must once its probe's write was refused (refuse.go's
// readyz-refused-idle); counted oom-started-<l2 state>.
func (r *run) provenRefusing(ctx context.Context, i int, admin string) {
	r.recoveredAs(ctx, i, admin, time.Time{}, true)
}

// recoveredAs is recovered; refusing also takes L2 degraded with the
// reason "writes refused".
func (r *run) recoveredAs(ctx context.Context, i int, admin string, since time.Time, refusing bool) {
	var last string
	for deadline := time.Now().Add(recoverWithin); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(50 * time.Millisecond) {
		var ready struct {
			L2, Coherence, Reason string
			Floor                 time.Time `json:"coherence_floor"`
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
		reads := ready.L2 == "up" || refusing && ready.L2 == "degraded" && ready.Reason == "writes refused"
		if err == nil && reads && ready.Coherence == "proven" && (since.IsZero() || !ready.Floor.Before(since.Add(-time.Second))) {
			if refusing {
				r.chk.Count("oom-started-l2-"+strings.ReplaceAll(ready.L2, " ", "-"), 1)
			}
			return
		}
		last = fmt.Sprintf("l2 %s %s, coherence %s, floor %v", ready.L2, ready.Reason, ready.Coherence, ready.Floor)
	}
	if since.IsZero() {
		r.violate("redis-recover", "replica %d not serving from Redis within %v (/readyz: %s)", i, recoverWithin, last)
		return
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
