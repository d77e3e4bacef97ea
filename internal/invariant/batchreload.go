package invariant

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/check"
	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// The batch-reload row (PCG stream 67): once a seed, between rounds, a
// reload of a replica's whole file (nothing changed: an operator's
// SIGHUP) lands while a bulk call of route q (batch max_size 2,
// max_in_flight 1) is in flight. The origin holds every /q call
// (origin.HoldQueue) and counts those at once; a read of one fresh id of
// q goes through the replica until its call is held, the replica
// reloads, and a read of another fresh id, in the same batch group (the
// same headers), follows. Route q's batch settings are unchanged, so the
// replica keeps its batcher (internal/proxy's keptBatching) and the
// second id waits behind the held call: a second /q call at the origin
// before the first is released is a batch-reload violation (two calls
// of one group at once under max_in_flight 1). Each reload made every
// batcher anew: the second id went upstream at once, beside the first,
// and the quarantine of ids that failed alone was forgotten with it.
// The row looks for that second call for batchReloadLook before it
// releases the first: the bound only ends the look, no count depends on
// it. Both reads are checked as any answer.

// Its write stage (write-reload): then, through a replica drawn on the
// same stream, a write of writeReloadPath is held at the origin before it
// is applied (origin.HoldWrite) across a reload that regains the write's
// invalidate rule: the replica applies its file torn (r-write without
// its rule, reload-torn's), the write goes (r-write takes it: no rule,
// its URI only), the whole file comes back while the write is held (the
// regained rule drops what it may reach: retire.go), the summary is read
// and stored at the version before the write, and the write is let
// through. It was acknowledged, so the summary read back through the
// replica is held to it (own-write): the write's invalidation must add
// what the table in force at its answer invalidates (internal/proxy's
// writeInv.reloaded). Planned under the torn table alone it dropped its
// URI only, and the summary read after it was the version it replaced.
// The torn file retires the routes it lacks, route s's held copies among
// them: the stage is a drop to its stale-if-error check
// (check.StartDrop), as reload-torn is. Checked counts write-reload and
// write-reload-stored.

// writeReloadPath is the write stage's resource: read and written by no
// round and no other row (reload-shadow's is /r/95).
const writeReloadPath = "/r/97"

// writeReload plays the write stage through replica k (see above).
func (r *run) writeReload(ctx context.Context, k int) {
	if !r.cfg.Mix.Has("write-reload") {
		return
	}
	write, summary := writeReloadPath, writeReloadPath+"/summary"
	res := origin.Resource(write)
	o, base := r.cfg.Origin, r.cfg.Replicas[k]
	o.SetProfile(res, origin.Profile{})
	r.chk.StartDrop()
	defer func() { r.chk.EndDrop(check.Now()) }()
	if err := r.cfg.ReloadTorn(k, true); err != nil {
		r.violate("write-reload", "replica %d: applying the torn file: %v", k, err)
		return
	}
	gate := make(chan struct{})
	arrived := o.HoldWrite(res, gate)
	defer o.HoldWrite(res, nil)
	opened := false
	open := func() {
		if !opened {
			opened = true
			close(gate)
		}
	}
	defer open()
	r.patches++ // the write reaches the origin (the runner's count of PATCHes)
	wrote := make(chan int, 1)
	go func() {
		st, _ := r.probe(ctx, k, base, http.MethodPatch, write, "write-reload-write-")
		wrote <- st
	}()
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		r.violate("harness", "replica %d: the write-reload stage's write never reached the origin", k)
		open()
		<-wrote
		return
	}
	if err := r.cfg.ReloadTorn(k, false); err != nil {
		r.violate("write-reload", "replica %d: applying the whole file: %v", k, err)
		open()
		<-wrote
		return
	}
	if r.fillStored(ctx, k, summary, "write-reload", "write-reload-fill-") {
		r.chk.Count("write-reload-stored", 1)
	}
	open()
	if st := <-wrote; st != http.StatusOK {
		r.violate("harness", "the write-reload stage's write answered %d", st)
		return
	}
	r.chk.Count("write-reload", 1)
	r.read(ctx, k, summary, "write-reload", "write-reload-read-")
}

// batchReloadLook is how long the row looks for a second /q call while
// the first is held.
const batchReloadLook = time.Second

// batchReloadRow is the row's state in a run.
type batchReloadRow struct {
	rng *rand.Rand
	at  int // the round after which it plays (-1: never)
}

// drawBatchReload draws the round after which the row plays, from stream
// 67 alone, so the other rows' draws are unchanged.
func (r *run) drawBatchReload() {
	r.batchReload.rng, r.batchReload.at = rand.New(rand.NewPCG(r.cfg.Seed, 67)), -1
	if r.cfg.Mix.Has("batch-reload") && r.cfg.ReloadTorn != nil && r.cfg.Rounds >= 4 && len(r.cfg.Admins) == len(r.cfg.Replicas) {
		r.batchReload.at = r.batchReload.rng.IntN(r.cfg.Rounds - 1)
	}
}

// batchReloadPlay plays the row after round (see above).
func (r *run) batchReloadPlay(ctx context.Context, round int) {
	if round != r.batchReload.at {
		return
	}
	rng := r.batchReload.rng
	k := rng.IntN(len(r.cfg.Replicas))
	w := rng.IntN(len(r.cfg.Replicas)) // the write stage's replica
	defer r.writeReload(ctx, w)
	// Ids no round reads (crowd and queue rounds' are 100000 and up),
	// new in each seed of a run; purged first, as the soak plays seeds
	// on one environment.
	first := fmt.Sprint(90000 + 2*round + 1)
	second := fmt.Sprint(90000 + 2*round + 2)
	if !r.purgeRoute(ctx, "q") {
		return
	}
	read := func(id string, q *traffic.Request) *traffic.Request {
		c := *q
		c.Hdr, c.Sent = q.Hdr.Clone(), maps.Clone(q.Sent)
		c.Route, c.Path, c.Replica, c.Crowd = "q", "/q/"+id, k, false
		c.Res = origin.Resource(c.Path)
		return &c
	}
	proto := r.gen.CrowdRequest(rng)
	o := r.cfg.Origin
	gate := make(chan struct{})
	o.HoldQueue(gate)
	released := false
	release := func() {
		if !released {
			released = true
			close(gate)
			o.HoldQueue(nil)
		}
	}
	defer release()
	base := o.QueueCalls.Load()
	done := make(chan struct{}, 2)
	send := func(q *traffic.Request) {
		defer func() { done <- struct{}{} }()
		r.readBack(ctx, q, r.cfg.Replicas[k], "batch-reload", "batch-reload-")
	}
	go send(read(first, proto))
	if !r.waitCalls(ctx, base+1, 5*time.Second) {
		r.violate("harness", "replica %d: the batch-reload row's first /q call never reached the origin", k)
		release()
		<-done
		return
	}
	if err := r.cfg.ReloadTorn(k, false); err != nil {
		r.violate("batch-reload", "replica %d: reloading the whole file: %v", k, err)
		release()
		<-done
		return
	}
	go send(read(second, proto))
	r.waitCalls(ctx, base+2, batchReloadLook)
	calls := o.QueueCalls.Load() - base
	high := o.QueueHigh.Load()
	release()
	<-done
	<-done
	r.chk.Count("batch-reload", 1)
	if high > 1 {
		r.violate("batch-reload", "replica %d: %d bulk calls of route q (max_in_flight 1) at once across a reload of its unchanged file (%d made while the first was held)", k, high, calls)
	}
}

// waitCalls waits until the origin has had n /q calls in all, for at
// most within, and reports whether it had.
func (r *run) waitCalls(ctx context.Context, n int64, within time.Duration) bool {
	for deadline := time.Now().Add(within); ctx.Err() == nil; time.Sleep(time.Millisecond) {
		if r.cfg.Origin.QueueCalls.Load() >= n {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
	return false
}
