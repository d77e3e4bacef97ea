package invariant

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/check"
	"github.com/sidecache/sidecache/internal/invariant/origin"
)

// The reload-torn row (PCG stream 43): between rounds, now and then, one
// replica applies its config file caught half written — cut just before
// r-write's invalidate line, so the write route keeps its methods and path
// but loses its rule, and every route after it is gone — as a SIGHUP at
// that moment, or a writer pausing longer than a poll, applies it (the
// watcher itself never applies a file it read only once: internal/server's
// watch.go). Through that replica it reads /r/{id}/summary first, until
// the replica's admin GET /cache shows the copy stored (fillStored), then,
// with the torn file in force, writes /r/{id}: the
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
	drawn := r.reloads.IntN(4)
	base := r.cfg.Replicas[k]
	// The round's profile of the resource may keep the summary from being
	// stored (private, 5xx, too large, Vary), and a write refused or
	// failed holds nothing: the row's steps get the plain profile (the
	// next round draws its own), and the summary is read until its
	// replica holds it (fillStored), so the torn write has a copy to
	// leave. A summary an earlier answer too large put under hit-for-pass
	// (min(ttl, 2 min)) is not stored whatever it answers now: then the
	// next id is tried, from the drawn one.
	var summary, write string
	for j := range 4 {
		id := 1 + (drawn+j)%4
		summary, write = fmt.Sprintf("/r/%d/summary", id), fmt.Sprintf("/r/%d", id)
		r.cfg.Origin.SetProfile(origin.Resource(write), origin.Profile{})
		if r.fillStored(ctx, k, summary, "reload-torn", "reload-torn-fill-") {
			r.chk.Count("reload-torn-stored", 1)
			break
		}
	}
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
	r.read(ctx, k, summary, "reload-torn", "reload-torn-read-")
}

// read GETs path through replica k as a plain probe (traffic.Probe),
// checked as any read (what names the row in messages); a body the origin
// broke off (truncate, stall) is the client's to see broken (readBack).
func (r *run) read(ctx context.Context, k int, path, what, count string) (status int, cacheStatus string) {
	q := r.gen.Probe(k, http.MethodGet, path, origin.Resource(path), k)
	return r.readBack(ctx, q, r.cfg.Replicas[k], what, count)
}

// storeWithin bounds how long fillStored waits for a fill to show in its
// replica's store: only a fill that is never stored waits it out.
const storeWithin = 2 * time.Second

// fillStored reads path through replica k (read), then asks the
// replica's admin GET /cache until it holds an entry that could answer
// that read (a 200, fresh or within stale_if_error: inspect), for at
// most storeWithin. So whatever follows comes after the fill is in the
// store (L1's may follow the answer, L2's does), an order read off the
// replica, not slept for. It reports whether the entry came; at once
// false (counted <what>-pass) for a read passed through (Cache-Status
// fwd=bypass: hit-for-pass after an answer too large), which stores
// nothing.
func (r *run) fillStored(ctx context.Context, k int, path, what, count string) bool {
	if _, cs := r.read(ctx, k, path, what, count); strings.Contains(cs, "fwd=bypass") {
		r.chk.Count(what+"-pass", 1)
		return false
	}
	if k >= len(r.cfg.Admins) {
		return false
	}
	target := "http://" + strings.ToLower(r.cfg.Host) + path
	for deadline := time.Now().Add(storeWithin); ctx.Err() == nil; time.Sleep(10 * time.Millisecond) {
		got, err := inspect(ctx, r.cfg.Admins[k], r.cfg.AdminToken, target)
		if err != nil {
			r.violate("harness", "replica %d: GET /cache: %v", k, err)
			return false
		}
		if len(got) > 0 {
			return true
		}
		if time.Now().After(deadline) {
			break
		}
	}
	r.chk.Count(what+"-unstored", 1)
	return false
}
