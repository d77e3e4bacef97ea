package invariant

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/origin"
)

// The promote-race row (PCG stream 57): once a seed, between rounds, an
// L2 hit whose reply reaches its replica after a peer's invalidation of
// it. The env runs one more replica (PromoteReplica) whose Redis replies
// pass through a gate (PromoteGate: held and released by the row; its
// commands go through at once) and whose subscription goes to Redis
// directly (subscribe_addrs), so the published invalidation can reach it
// while a read's reply waits: the order a loaded machine makes when the
// goroutine that reads the reply is not run for a while.
//
// Through a replica of the pair the row reads promoteRes until L2 holds
// it, makes the origin fail its reads (so no refetch stores over what
// follows), holds the gate, reads it through the gated replica (its L2
// read: Redis checks the entry's epochs, answers, and the reply is held),
// writes it through the pair's replica, waits until the gated replica has
// applied the published invalidation (its
// sidecache_invalidations_total{source="peer"}), and releases the gate.
// The reply is an L2 hit that the tiers copy into L1 (promote); the
// tombstone refuses it to that read, which fails at the origin.
//
// Checked (promote-race): once the gated replica has applied the
// invalidation, its L1 holds no entry requested before the write was
// sent (admin GET /cache). One would be served as a fresh hit once the
// tombstones lapse (upstream.timeout + 10 s), for the rest of its ttl:
// far past max_lag after the write. Counted: promote-race (played),
// promote-race-unheld (the gated read's reply was never held: nothing
// raced), promote-race-late (the invalidation was not applied while the
// reply was held).

// promoteRes is the row's resource: read and written by no round and no
// other row.
const promoteRes = "/r/87"

// promoteRow is the row's state in a run.
type promoteRow struct {
	rng *rand.Rand
	at  int // the round after which it plays (-1: never)
}

// drawPromoteRound draws the round after which the row plays, from
// stream 57 alone, so the other rows' draws are unchanged.
func (r *run) drawPromoteRound() {
	r.promote.rng, r.promote.at = rand.New(rand.NewPCG(r.cfg.Seed, 57)), -1
	if r.cfg.Mix.Has("promote-race") && r.cfg.PromoteGate != nil && r.cfg.Rounds >= 4 && len(r.cfg.Replicas) >= 1 {
		r.promote.at = r.promote.rng.IntN(r.cfg.Rounds - 1)
	}
}

// promoteWithin bounds each of the row's waits on its replicas.
const promoteWithin = 5 * time.Second

// promoteRace plays the row after round (see above).
func (r *run) promoteRace(ctx context.Context, round int) {
	if round != r.promote.at {
		return
	}
	if r.oom.on {
		// Redis refuses every store while over maxmemory (oom.go).
		r.promote.at++
		return
	}
	g := r.cfg.PromoteGate
	k := r.promote.rng.IntN(len(r.cfg.Replicas))
	gi := len(r.cfg.Replicas) + 2 // an index no other write names: max-lag only
	target := "http://" + strings.ToLower(r.cfg.Host) + promoteRes
	// Read until L2 answers it, through each replica of the pair in
	// turn: on a Redis that has evicted (evict-epochs), a new tag's first
	// fill reads as a miss, and the replica that made it holds it in L1.
	fills := 0
	if !r.waitFor(ctx, func() bool {
		r.read(ctx, (k+fills)%len(r.cfg.Replicas), promoteRes, "promote-race", "promote-race-fill-")
		fills++
		got, err := inspect(ctx, r.cfg.Admins[k], r.cfg.AdminToken, target)
		return err == nil && strings.Contains(strings.Join(got, "\n"), "l2 ")
	}) {
		r.chk.Count("promote-race-unstored", 1)
		return
	}
	res := origin.Resource(promoteRes)
	r.cfg.Origin.SetProfile(res, origin.Profile{Fail: 100})
	defer r.cfg.Origin.SetProfile(res, origin.Profile{})

	g.Hold(promoteRes)
	released := false
	release := func() {
		if !released {
			released = true
			g.Release()
		}
	}
	defer release()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.probe(ctx, gi, r.cfg.PromoteReplica, http.MethodGet, promoteRes, "promote-race-read-")
	}()
	if !r.waitFor(ctx, g.Held) {
		r.chk.Count("promote-race-unheld", 1)
		release()
		<-done
		return
	}
	peer := func() float64 {
		n, _ := readCounter(ctx, r.cfg.PromoteAdmin, func(line string) bool {
			return strings.HasPrefix(line, "sidecache_invalidations_total{") && strings.Contains(line, `source="peer"`)
		})
		return n
	}
	before := peer()
	sent := time.Now()
	r.patches++ // the row's write reaches the origin (the runner's count of PATCHes)
	if st, _ := r.probe(ctx, k, r.cfg.Replicas[k], http.MethodPatch, promoteRes, "promote-race-write-"); st != http.StatusOK {
		r.violate("harness", "the promote-race row's write answered %d", st)
		return
	}
	if !r.waitFor(ctx, func() bool { return peer() > before }) {
		r.chk.Count("promote-race-late", 1)
	}
	release()
	<-done
	r.chk.Count("promote-race", 1)
	got, err := inspect(ctx, r.cfg.PromoteAdmin, r.cfg.AdminToken, target)
	if err != nil {
		r.violate("harness", "the promote-race replica: GET /cache: %v", err)
		return
	}
	for _, e := range got {
		f := strings.Fields(e) // tier, key, stored_at
		if len(f) < 3 || f[0] != "l1" {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, f[len(f)-1])
		if err == nil && at.Before(sent) {
			r.violate("promote-race", "%s: the replica's L1 holds an entry requested at %s, before the write sent at %s, after it applied that write's invalidation: served as a fresh hit once its tombstones lapse",
				promoteRes, f[len(f)-1], sent.UTC().Format(time.RFC3339Nano))
		}
	}
}

// waitFor polls cond every 10 ms for at most promoteWithin.
func (r *run) waitFor(ctx context.Context, cond func() bool) bool {
	for deadline := time.Now().Add(promoteWithin); ctx.Err() == nil; time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
	return false
}
