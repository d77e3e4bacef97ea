package invariant

import (
	"context"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/check"
)

// The reload-shadow row (PCG stream 45): once a seed, between rounds, a
// reload puts a route before r-write that takes its PATCHes of /r/{id}
// and invalidates nothing (first match wins: r-write's rule stays in the
// file and drops nothing meanwhile), then the file comes back whole.
// docs/configuration.md, "Reload": a rule a reload regains drops what it
// may reach, and a rule a route before it shadowed counts as regained
// once that route goes (internal/server's retire.go, gainedRules).
//
// Through one replica (writer; with the other too, drawn) the row reads
// shadowSummary until each replica holds it (fillStored), writes
// shadowWrite under the whole file (its rule drops the summary) and reads
// the summary back (own-write, and stored again); then the writer, and
// the other replica when drawn, apply the shadowing file, the writer
// reads the summary (a hit, held to the first write) and writes
// shadowWrite under the shadow (only its URI dropped: the summary's copies
// stay, the config's doing, so nothing reads them meanwhile); then the
// whole file comes back and the summary is read through the writer at
// once (own-write) and through the other replica once max_lag (plus
// margin) has passed since the write (max-lag). Both replicas' copies and
// L2's are the regained rule's to drop: on the writer's reload, on every
// replica and in L2, as a purge by route. With cache.tag_headers on (the
// replicas' default) that reload drops every cacheable route's entries,
// route s's held copies too: the row is a drop for the stale-if-error
// check (check.StartDrop), as reload-torn's is.

// The row's resource: read and written by no round and no other row.
const (
	shadowSummary = "/r/95/summary"
	shadowWrite   = "/r/95"
)

// shadowRow is the row's state in a run.
type shadowRow struct {
	rng *rand.Rand
	at  int // the round after which it plays (-1: never)
}

// drawShadowRound draws the round after which the row plays, from stream
// 45 alone.
func (r *run) drawShadowRound() {
	r.shadow.rng, r.shadow.at = rand.New(rand.NewPCG(r.cfg.Seed, 45)), -1
	if r.cfg.Mix.Has("reload-shadow") && r.cfg.ReloadShadow != nil && r.cfg.Rounds >= 4 && len(r.cfg.Replicas) >= 2 {
		r.shadow.at = r.shadow.rng.IntN(r.cfg.Rounds - 1)
	}
}

// reloadShadow plays the row after round (see above).
func (r *run) reloadShadow(ctx context.Context, round int) {
	if round != r.shadow.at {
		return
	}
	rng := r.shadow.rng
	k := rng.IntN(len(r.cfg.Replicas))
	p := (k + 1) % len(r.cfg.Replicas)
	both := rng.IntN(2) == 0
	base := r.cfg.Replicas[k]
	for _, i := range []int{k, p} {
		if r.fillStored(ctx, i, shadowSummary, "reload-shadow", "reload-shadow-fill-") {
			r.chk.Count("reload-shadow-stored", 1)
		}
	}
	r.patches++ // the row's writes reach the origin (the runner's count of PATCHes)
	if st, _ := r.probe(ctx, k, base, http.MethodPatch, shadowWrite, "reload-shadow-write-"); st != http.StatusOK {
		r.violate("harness", "the reload-shadow row's first write answered %d", st)
		return
	}
	if r.fillStored(ctx, k, shadowSummary, "reload-shadow", "reload-shadow-own-") {
		r.chk.Count("reload-shadow-stored", 1)
	}
	shadowed := []int{k}
	if both {
		shadowed = append(shadowed, p)
	}
	for _, i := range shadowed {
		if err := r.cfg.ReloadShadow(i, true); err != nil {
			r.violate("reload-shadow", "replica %d: applying the shadowing file: %v", i, err)
			return
		}
	}
	r.read(ctx, k, shadowSummary, "reload-shadow", "reload-shadow-shadowed-")
	r.patches++
	st, _ := r.probe(ctx, k, base, http.MethodPatch, shadowWrite, "reload-shadow-write-")
	wrote := time.Now()
	// The whole file regains r-write's rule, and with cache.tag_headers
	// on (the default: any entry may carry a surrogate key the rule's
	// template expands to) the reload drops the entries of every
	// cacheable route, on every replica and in L2 (docs/configuration.md,
	// "Reload"), route s's held copies among them (check.StartDrop). The
	// drop ends when the row returns, past max_lag after the reload: the
	// peers have dropped their L1 copies by then.
	r.chk.StartDrop()
	defer func() { r.chk.EndDrop(check.Now()) }()
	for _, i := range shadowed {
		if err := r.cfg.ReloadShadow(i, false); err != nil {
			r.violate("reload-shadow", "replica %d: applying the whole file: %v", i, err)
			return
		}
	}
	if st != http.StatusOK {
		r.violate("harness", "the reload-shadow row's shadowed write answered %d", st)
		return
	}
	r.chk.Count("reload-shadow", 1)
	r.read(ctx, k, shadowSummary, "reload-shadow", "reload-shadow-read-")
	time.Sleep(time.Until(wrote.Add(r.cfg.MaxLag + r.cfg.LagMargin + 100*time.Millisecond)))
	r.read(ctx, p, shadowSummary, "reload-shadow", "reload-shadow-peer-")
}
