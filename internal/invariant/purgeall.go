package invariant

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/check"
	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// Wide purges (the purge-all and purge-route rows): POST /purge?all=1
// and ?route=NAME sent to a random replica at a random point of a round,
// as the key and tag purges of purge.go are. Before the purge the origin
// changes every resource it covers (origin.Bump: no write reaches a
// replica), so a body made before the purge began carries an older
// version than every body made after; the acknowledged purge then holds
// every later read of each of them to the new version, as a write
// acknowledged through the purging replica: there at once (its L1 is
// emptied and its fills in flight refused before it answers, L2's epochs
// raised in Redis), on the peers after max_lag (their L1 hears it through
// pub/sub). docs/admin-api.md, "Purging everything": "From then on no
// entry fetched before the purge is served by any replica, including one
// a fill that was in flight stores afterwards."

// wideRoutes are the routes whose resources the harness can name and
// version (one stamp per answer, no bulk): a wide purge's scope.
var wideRoutes = []string{"r", "p", "n", "t", "k", "h"}

// wideResources are the resources of route that the rounds read.
func wideResources(route string) []string {
	if route == "t" {
		return []string{"t/plain", "t/caf%e9"}
	}
	out := make([]string, 0, 4)
	for id := 1; id <= 4; id++ {
		out = append(out, fmt.Sprintf("%s/%d", route, id))
	}
	return out
}

// widePurge is one wide purge a round sends beside its requests.
type widePurge struct {
	sel, val string // "all", "1" or "route", its name
	replica  int
	res      []string         // the resources it covers, changed behind the cache
	read     *traffic.Request // a read of the round it waits for (nil: none)
	wait     time.Duration    // else how long after the round began it goes
	acked    bool
}

// drawWide draws, on its own sequence (r.wides, PCG stream 27, so no
// other row's draw moves), whether the round sends a wide purge, which,
// through which replica, and when: once a fill of a read of the round
// has taken its version at the origin (most of the time: the fill is in
// flight across the purge), or after a delay of its own.
func (r *run) drawWide(reqs []*traffic.Request) *widePurge {
	all, route := r.cfg.Mix.Has("purge-all"), r.cfg.Mix.Has("purge-route")
	if !all && !route || len(r.cfg.Admins) == 0 || r.wides.IntN(100) >= 15 {
		return nil
	}
	d := &widePurge{replica: r.wides.IntN(len(r.cfg.Admins)), wait: time.Duration(r.wides.IntN(40)) * time.Millisecond}
	var cands []*traffic.Request
	for _, q := range reqs {
		if q.Method == http.MethodGet && slices.Contains(wideRoutes, q.Route) && origin.Resource(q.Path) != "" {
			cands = append(cands, q)
		}
	}
	if len(cands) > 0 && r.wides.IntN(100) < 75 {
		d.read = cands[r.wides.IntN(len(cands))]
	}
	if all && (!route || r.wides.IntN(2) == 0) {
		d.sel, d.val = "all", "1"
		for _, rt := range wideRoutes {
			d.res = append(d.res, wideResources(rt)...)
		}
		return d
	}
	d.sel, d.val = "route", wideRoutes[r.wides.IntN(len(wideRoutes))]
	if d.read != nil {
		d.val = d.read.Route
	}
	d.res = wideResources(d.val)
	return d
}

// purgeWide waits for d's moment, changes d's resources behind the cache
// and purges through replica d.replica's admin API. A purge of
// everything drops route s's stale-if-error copies too (check's
// StartDrop). A 500 (Redis did not confirm in time) holds nothing, as
// purge does; any other answer but 200 is a violation.
func (r *run) purgeWide(ctx context.Context, d *widePurge, answered <-chan struct{}) {
	kind := "purge-" + d.sel
	var moment <-chan struct{} // nil channels never fire
	var timer <-chan time.Time
	if d.read != nil {
		moment = r.cfg.Origin.WatchRead(origin.Resource(d.read.Path))
	} else {
		timer = time.After(d.wait)
	}
	select {
	case <-moment:
		r.chk.Count(kind+"-in-flight", 1)
	case <-timer:
	case <-answered:
	case <-ctx.Done():
		return
	}
	if d.sel == "all" {
		r.chk.StartDrop()
	}
	vers := make([]int, len(d.res))
	for i, res := range d.res {
		vers[i] = r.cfg.Origin.Bump(res)
	}
	resp, body, err := r.adminPost(ctx, d.replica, "/purge?"+d.sel+"="+url.QueryEscape(d.val))
	end := check.Now()
	if d.sel == "all" {
		defer r.chk.EndDrop(end)
	}
	if err != nil {
		r.violate(kind, "%v", err)
		return
	}
	switch {
	case resp.StatusCode == http.StatusInternalServerError:
		r.chk.Count(kind+"-500", 1) // not acknowledged: holds nothing
		return
	case resp.StatusCode != http.StatusOK:
		r.violate(kind, "replica %d: %s %q", d.replica, resp.Status, body)
		return
	case d.sel == "all":
		var a struct{ All bool }
		if json.Unmarshal(body, &a) != nil || !a.All {
			r.violate(kind, "replica %d: 200 %q, want {\"all\":true,…}", d.replica, body)
			return
		}
	}
	r.chk.Count(kind, 1)
	for i, res := range d.res {
		r.chk.Acknowledge(res, "purge?"+d.sel+"="+d.val, vers[i], end, d.replica)
	}
	d.acked = true
}

// adminPost sends an authorized POST to replica i's admin API.
func (r *run) adminPost(ctx context.Context, i int, target string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.cfg.Admins[i]+target, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+r.cfg.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("POST %s: %w", target, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// readAfterWide reads the read d waited for again through the purging
// replica once the round is over, as readAfterPurge does: a fill in
// flight across the purge that stored its answer, here or through L2,
// is an own-write violation. A purge that waited for no read reads
// nothing back: the round's later reads are checked all the same.
func (r *run) readAfterWide(ctx context.Context, d *widePurge) {
	src := d.read
	if src == nil {
		return
	}
	rq := *src
	rq.Replica, rq.Rid = d.replica, ""
	rq.HalfClose, rq.Absolute, rq.Asterisk, rq.Hangup, rq.Cond = false, false, false, false, traffic.Cond{}
	rq.Hdr = src.Hdr.Clone()
	for _, h := range []string{"X-Request-Id", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since", "Range"} {
		rq.Hdr.Del(h)
	}
	r.readBack(ctx, &rq, r.cfg.Replicas[d.replica], "read after a purge?"+d.sel, "purge-"+d.sel+"-read-")
}
