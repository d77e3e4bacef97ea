package invariant

import (
	"context"
	"net/http"
	"strings"
	"time"
)

// The restart-retag row (PCG stream 46): once a seed, between rounds, a
// deploy that renames a route and changes its tag template. Through each
// replica, retagSummary (a resource no round reads) is read, so
// L2 holds a copy tagged r:{id} and _route:r-summary. Then a replica is
// started from the deploy's config (Config.StartRetagged: r-summary
// renamed r-digest and tagged rsum:{id}, which r-write invalidates instead
// of r:{id}) and, once it serves from Redis, retagWrite is written
// through it and the summary read back through it. The write was
// acknowledged through that replica, so the read is held to its version
// (own-write): the copy the old config stored under the same key (keys do
// not name the route) carries none of the tags the new config's write
// drops, and must be a miss, not an L2 hit (internal/proxy's carried).
//
// Only the new replica reads the summary after the write: an old replica
// keeps its own L1 copy under its own config, which a write under the new
// one does not reach — the deploy's inconsistency, not the sidecar's (a
// rolling deploy that changes tags must keep the old ones invalidated
// until the old pods are gone).

// retagSummary and retagWrite are the row's probe: /r/61 is read by no
// round and no other row.
const (
	retagSummary = "/r/61/summary"
	retagWrite   = "/r/61"
)

// drawRetag draws the round after which the row plays (-1: never), from
// stream 46 alone, so the other rows' draws are unchanged.
func (r *run) drawRetag() {
	r.retagAt = -1
	if r.cfg.Mix.Has("restart-retag") && r.cfg.StartRetagged != nil && r.cfg.Rounds >= 4 {
		r.retagAt = r.retags.IntN(r.cfg.Rounds - 1)
	}
}

// restartRetag plays the row after round (see above).
func (r *run) restartRetag(ctx context.Context, round int) {
	if round != r.retagAt {
		return
	}
	// Through each replica, as the oom row's probe: on an evicting Redis
	// (evict-epochs) a new tag's first fill is not kept in L2, the
	// second is.
	for i, base := range r.cfg.Replicas {
		r.probe(ctx, i, base, http.MethodGet, retagSummary, "retag-fill-")
		time.Sleep(100 * time.Millisecond) // L2's store may follow the answer
	}
	proxy, admin := r.cfg.StartRetagged()
	// An index no other row's replica has: the write and the read are
	// this replica's own.
	i := len(r.cfg.Replicas) + 3
	r.proven(ctx, i, admin)
	r.chk.Count("restart-retag", 1)
	r.patches++ // the probe's write reaches the origin (the runner's count of PATCHes)
	if st, _ := r.probe(ctx, i, proxy, http.MethodPatch, retagWrite, "retag-write-"); st != http.StatusOK {
		r.violate("harness", "the retag probe's write answered %d", st)
		return
	}
	if _, cs := r.probe(ctx, i, proxy, http.MethodGet, retagSummary, "retag-read-"); strings.Contains(cs, "detail=l2") {
		r.chk.Count("retag-read-l2", 1) // the old copy, served
	}
}
