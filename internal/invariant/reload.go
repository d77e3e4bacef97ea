package invariant

import (
	"context"
	"fmt"
	"net/http"

	"github.com/sidecache/sidecache/internal/invariant/check"
	"github.com/sidecache/sidecache/internal/invariant/origin"
)

// The reload-torn row (PCG stream 43): between rounds, now and then, one
// replica applies its config file caught half written — cut just before
// r-write's invalidate line, so the write route keeps its methods and path
// but loses its rule, and every route after it is gone — as a SIGHUP at
// that moment, or a writer pausing longer than a poll, applies it (the
// watcher itself never applies a file it read only once: internal/server's
// watch.go). Through that replica it reads /r/{id}/summary first (so a
// copy is stored), then, with the torn file in force, writes /r/{id}: the
// write drops /r/{id}'s URI, not r:{id}, so the summary's copy stays as it
// was; then the replica applies the whole file again and reads the
// summary back. The write was acknowledged, so that read, and every later
// one, is held to its version (through the replica at once, the peers
// after max_lag): docs/configuration.md, "Reload" — a rule a reload gains
// drops what it may reach — is what makes it hold. Nothing else is sent
// meanwhile: under the torn file a stale summary is the config's doing.

// reloadTorn plays the row once in a while (r.reloads), in every run,
// those that draw bulk-vary-withheld included: a reload keeps the
// forwarding a route learned when the route is unchanged (proxy's
// keptForwarding), and a bulk call's waiters are judged by what the call
// sent, not by the route's rules when its answer comes (proxy's
// withheldFrom, elementVary). Before both, each reload reopened the window
// in which route s learns X-Tenant from a bulk answer's Vary, and a call
// in flight across that learning stored its answer made without X-Tenant
// as its opener's variant (seed 3 with this row on: "GET /s/1
// [X-Tenant=globex]: answer for tenant=\"\"").
func (r *run) reloadTorn(ctx context.Context) {
	if !r.cfg.Mix.Has("reload-torn") || r.cfg.ReloadTorn == nil || r.reloads.IntN(100) >= 8 {
		return
	}
	k := r.reloads.IntN(len(r.cfg.Replicas))
	id := 1 + r.reloads.IntN(4)
	base := r.cfg.Replicas[k]
	summary, write := fmt.Sprintf("/r/%d/summary", id), fmt.Sprintf("/r/%d", id)
	r.read(ctx, k, summary, "reload-torn-fill-")
	// The torn file retires the routes it lacks, route s's held copies
	// among them (check.StartDrop), as the whole file's return may.
	r.chk.StartDrop()
	defer func() { r.chk.EndDrop(check.Now()) }()
	if err := r.cfg.ReloadTorn(k, true); err != nil {
		r.violate("reload-torn", "replica %d: applying the torn file: %v", k, err)
		return
	}
	r.probe(ctx, k, base, http.MethodPatch, write, "reload-torn-write-")
	if err := r.cfg.ReloadTorn(k, false); err != nil {
		r.violate("reload-torn", "replica %d: applying the whole file: %v", k, err)
		return
	}
	r.chk.Count("reload-torn", 1)
	r.read(ctx, k, summary, "reload-torn-read-")
}

// read GETs path through replica k as a plain probe (traffic.Probe),
// checked as any read; a body the origin broke off (truncate, stall) is
// the client's to see broken (readBack).
func (r *run) read(ctx context.Context, k int, path, count string) {
	q := r.gen.Probe(k, http.MethodGet, path, origin.Resource(path), k)
	r.readBack(ctx, q, r.cfg.Replicas[k], "reload-torn", count)
}
