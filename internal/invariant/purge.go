package invariant

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/sidecache/sidecache/internal/invariant/check"
	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// purgeDraw is one admin purge a round sends beside its requests (the
// purge row): the resource, and the selector and value it is purged by.
type purgeDraw struct {
	res      string
	sel, val string
	replica  int
	read     *traffic.Request // the round's read it was drawn from
	acked    bool             // the purge was answered 200
}

// drawPurge picks, on its own sequence (r.purges, as drawTrickle's), a
// resource one of the round's reads asks for on a route whose key the
// harness can spell (r: method, Host, path; h: key.host), and how it is
// purged: by key, or on r by its tag. nil: no purge this round.
func (r *run) drawPurge(reqs []*traffic.Request) *purgeDraw {
	if !r.cfg.Mix.Has("purge") || len(r.cfg.Admins) == 0 || r.purges.IntN(100) >= 30 {
		return nil
	}
	var cands []*traffic.Request
	for _, q := range reqs {
		if q.Method == http.MethodGet && (q.Route == "r" || q.Route == "h") && origin.Resource(q.Path) != "" {
			cands = append(cands, q)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	q := cands[r.purges.IntN(len(cands))]
	res := origin.Resource(q.Path)
	d := &purgeDraw{read: q, res: res, sel: "key", val: "GET " + strings.ToLower(r.cfg.Host) + "/" + res, replica: r.purges.IntN(len(r.cfg.Admins))}
	if q.Route == "r" && r.purges.IntN(2) == 0 {
		d.sel, d.val = "tag", "r:"+strings.TrimPrefix(res, "r/")
	}
	return d
}

// purge waits until a fill of d's resource has taken its version at the
// origin (or the round's requests are all answered), changes the resource
// behind the cache (origin.Bump), and purges it through the admin API of
// replica d.replica. An acknowledged purge holds later reads to the new
// version as an acknowledged write does: through that replica at once,
// through the others after max_lag. So a fill in flight that stores its
// pre-purge answer, here or on a peer, or a variant the purge left, is an
// own-write or max-lag violation.
func (r *run) purge(ctx context.Context, d *purgeDraw, answered <-chan struct{}) {
	select {
	case <-r.cfg.Origin.WatchRead(d.res):
		r.chk.Count("purge-in-flight", 1)
	case <-answered:
	case <-ctx.Done():
		return
	}
	ver := r.cfg.Origin.Bump(d.res)
	target := r.cfg.Admins[d.replica] + "/purge?" + d.sel + "=" + url.QueryEscape(d.val)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, nil)
	if err != nil {
		r.violate("purge", "%s: %v", target, err)
		return
	}
	req.Header.Set("Authorization", "Bearer "+r.cfg.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.violate("purge", "POST %s: %v", target, err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	end := check.Now()
	switch {
	case resp.StatusCode == http.StatusInternalServerError:
		// The purge could not be confirmed in Redis in time (a loaded
		// machine, -race): not acknowledged, so it holds nothing, as a
		// write answered 500. docs/admin-api.md: repeat it.
		r.chk.Count("purge-500", 1)
		return
	case resp.StatusCode != http.StatusOK:
		r.violate("purge", "POST %s: %s %q", target, resp.Status, body)
		return
	}
	r.chk.Count("purge-"+d.sel, 1)
	r.chk.Acknowledge(d.res, "purge?"+d.sel+"="+d.val, ver, end, d.replica)
	d.acked = true
}

// readAfterPurge reads d's resource back through the purging replica once
// the round (and so the fill the purge raced) is over: a fill that stored
// its pre-purge answer here or, through L2, on the peer is an own-write
// violation. The draw's read is sent again as a plain GET (no
// conditional, range, or hang-up) with its own X-Request-Id (the resend
// check counts an id's calls). It runs after the round's calls were
// counted, so it spends no round's budget.
func (r *run) readAfterPurge(ctx context.Context, d *purgeDraw) {
	rq := *d.read
	rq.Replica, rq.Rid = d.replica, ""
	rq.HalfClose, rq.Absolute, rq.Asterisk, rq.Folded, rq.Hangup, rq.Cond = false, false, false, false, false, traffic.Cond{}
	rq.Hdr = d.read.Hdr.Clone()
	for _, h := range []string{"X-Request-Id", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since", "Range"} {
		rq.Hdr.Del(h)
	}
	r.readBack(ctx, &rq, r.cfg.Replicas[d.replica], "read after a purge", "purge-read-")
}
