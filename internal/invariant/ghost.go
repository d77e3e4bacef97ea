package invariant

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/check"
	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// The ghost-lease row: a replica that crashed while it held fill leases.
//
// A replica that misses a key takes the key's lease in Redis, so that one
// replica fetches it for the cluster while the others wait for its fill
// (internal/lease). One that dies meanwhile leaves its leases behind:
// each lease key holds the dead holder's token (32 hex digits), with
// whatever its last renewal left of the lease hold (cache.l2's
// Options.LeaseHold, renewed every third of it: between a third and the
// whole of it when the renewals were on time; internal/cache/l2/lease.go).
// No one will fill those keys. Their waiters must see each lease lapse
// and take it over (one of them fetches for the cluster; a batch route's
// waiters on one replica take theirs over together, lease/sweep.go), not
// wait for a fill that never comes.
//
// In about one ordinary round in six (stream 37), before the round is
// played, the harness writes into Redis what such a holder would leave:
// its leases (SET NX, so a live holder's lease or mark stays as it is),
// all with one remaining hold (one crash), for
//
//   - fresh keys only this round reads, so each read of them is a miss
//     that meets the dead lease: one plain resource of route r, read
//     through 1-3 replicas, and 1-4 ids of batch route u, each read
//     alone once or twice (random replicas, identities, Accept-Encoding
//     and X-Tenant: several batch groups), sometimes also in a split list
//     (a list's ids take no lease: they join the batcher, and their fill
//     ends the waits on their leases);
//   - and a third of the round's own reads and lists whose key the
//     replica's admin GET /cache can name (canonical spellings only).
//
// Every answer is checked as any other (identity, resource, versions,
// coding), the round's upstream calls against its budget (a takeover is
// one fetch of the read's budget: traffic.BudgetRead), and two more:
//
//   - held: a read whose key's lease the crashed holder left is answered
//     within the lease's ttl plus upstream.timeout (the ttl a batched id's
//     lease is taken for: max_wait + 2 × upstream.timeout), its client's
//     own limit; past it the read is waiting for a fill that never comes;
//   - ghost-lease: a one-id read is never the sidecar's own 504 (no
//     origin stamp; a list's ids take no lease, its failures are the
//     collateral check's):
//     the origin answers every read at once, so a 504 is upstream.timeout
//     spent waiting on the dead lease.
//
// Checked counts ghost-lease-written (leases written), ghost-lease-kept
// (keys whose lease was not free), ghost-lease-<status> (the ghosted
// requests' answers) and ghost-lease-takeovers (what the replicas'
// sidecache_lease_takeovers_total grew by over those rounds).

// ghostBase is the first of the ghost-lease row's fresh ids, above every
// id an ordinary round draws (1-64, and 8 and 9 the restart probes') and
// below the crowd rounds' (origin.CrowdID); ghostSpan ids per round.
const (
	ghostBase = 50000
	ghostSpan = 8
)

// ghostable is a path whose key the admin API names as a read's own:
// the canonical spellings of the cached routes (another spelling passes
// through and takes no lease).
var ghostable = regexp.MustCompile(`^/(r|p|n|k|h|u|e|s)/[1-9][0-9]*$|^/t/(plain|caf%E9)$`)

// ghostState is a ghost-lease round's state: the takeovers counted before it.
type ghostState struct {
	takeovers float64
}

// drawGhosts draws the round's ghost leases (on r.ghosts, stream 37),
// writes them into Redis, marks the requests they are for (q.Ghost) and
// returns the reads of the row's fresh keys to add to the round. nil: not
// a ghost-lease round.
func (r *run) drawGhosts(ctx context.Context, reqs []*traffic.Request) ([]*traffic.Request, *ghostState) {
	if !r.cfg.Mix.Has("ghost-lease") || r.cfg.Ghost == nil || len(r.cfg.Admins) == 0 || r.cfg.LeaseHold <= 0 {
		return nil, nil
	}
	rng := r.ghosts
	if rng.IntN(6) != 0 {
		return nil, nil
	}
	if r.oom.on {
		// Redis is over maxmemory under noeviction (oom.go): it refuses
		// the lease a crashed holder would have left, as it refuses the
		// replicas' own (no lease is taken during the stretch).
		return nil, nil
	}
	hold := r.cfg.LeaseHold
	// One crash: what its last renewal left of every lease it held.
	left := hold/3 + time.Duration(rng.Int64N(int64(hold-hold/3)+1))
	left = left.Truncate(time.Millisecond)
	base := ghostBase + r.ghostRounds*ghostSpan
	r.ghostRounds++
	n := len(r.cfg.Replicas)
	var extra []*traffic.Request
	read := func(path, route string) *traffic.Request {
		q := r.gen.Probe(rng.IntN(4), http.MethodGet, path, origin.Resource(path), rng.IntN(n))
		q.Route, q.Ghost = route, true
		return q
	}
	plain := fmt.Sprintf("/r/%d", base)
	for range 1 + rng.IntN(3) {
		extra = append(extra, read(plain, "r"))
	}
	var ids []string
	for i := range 1 + rng.IntN(4) {
		id := fmt.Sprint(base + 1 + i)
		ids = append(ids, id)
		for range 1 + rng.IntN(2) {
			// With the headers that group batches (Accept-Encoding,
			// X-Tenant): one takeover round's ids go out in a bulk
			// call per group (internal/proxy/takeover.go).
			q := r.gen.CrowdRequest(rng)
			q.Crowd, q.Path, q.Res, q.Ghost = false, "/u/"+id, "u/"+id, true
			extra = append(extra, q)
		}
	}
	if rng.IntN(3) == 0 {
		q := read("/u", "u")
		q.Kind, q.Res, q.Ids = "list", "", ids
		q.Query = "ids=" + strings.Join(ids, ",")
		q.Budget = traffic.BudgetList(len(ids))
		extra = append(extra, q)
	}
	// The round's own reads and lists, a third of them.
	var drawn []*traffic.Request
	for _, q := range reqs {
		if rng.IntN(3) == 0 && r.ghostEligible(q) {
			drawn = append(drawn, q)
		}
	}
	// Every key named first, then the leases written at once: they are
	// one holder's, and none should have run down before the round.
	keys := map[string]bool{}
	var order []string
	name := func(q *traffic.Request, path string) bool {
		k, err := r.leaseKey(ctx, q, path)
		if err != nil {
			r.violate("harness", "ghost-lease: %s: %v", q, err)
			return false
		}
		if !keys[k] {
			keys[k] = true
			order = append(order, k)
		}
		return true
	}
	name(extra[0], plain)
	for _, id := range ids {
		name(extra[0], "/u/"+id)
	}
	for _, q := range drawn {
		ok := true
		if q.Kind == "list" {
			for _, id := range q.Ids {
				ok = ok && name(q, "/"+q.Route+"/"+id)
			}
		} else {
			ok = name(q, q.Path)
		}
		q.Ghost = ok
	}
	for _, k := range order {
		token := fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64())
		written, err := r.cfg.Ghost(ctx, k, token, left)
		switch {
		case err != nil:
			r.violate("harness", "ghost-lease: writing the lease of %q: %v", k, err)
		case written:
			r.chk.Count("ghost-lease-written", 1)
		default:
			r.chk.Count("ghost-lease-kept", 1) // a live holder's lease, or a mark
		}
	}
	return extra, &ghostState{takeovers: r.takeovers(ctx)}
}

// endGhosts counts what the replicas' takeovers grew by over the round.
func (r *run) endGhosts(ctx context.Context, g *ghostState) {
	if g == nil {
		return
	}
	if d := r.takeovers(ctx) - g.takeovers; d > 0 {
		r.chk.Count("ghost-lease-takeovers", int(d))
	}
}

// takeovers is the sum of the replicas' sidecache_lease_takeovers_total.
func (r *run) takeovers(ctx context.Context) float64 {
	var sum float64
	for i, a := range r.cfg.Admins {
		n, err := readCounter(ctx, a, func(line string) bool { return strings.HasPrefix(line, "sidecache_lease_takeovers_total{") })
		if err != nil {
			r.violate("harness", "replica %d: /metrics: %v", i, err)
		}
		sum += n
	}
	return sum
}

// ghostEligible reports whether q is a read or a list of a cached route
// whose lease key the admin API names: sent as drawn (not half-closed,
// trickled, asterisk-form or folded), canonically spelled.
func (r *run) ghostEligible(q *traffic.Request) bool {
	if q.Method != http.MethodGet && q.Method != http.MethodHead || q.HalfClose || q.Trickle || q.Asterisk || q.Folded || q.After != nil {
		return false
	}
	switch q.Kind {
	case "read":
		return ghostable.MatchString(q.Path)
	case "list":
		// Not one passed through whole (an id twice, or spelled 05:
		// list-as-asked), whose ids are no keys of their own.
		return (q.Route == "u" || q.Route == "s") && q.Path == "/"+q.Route && len(q.Ids) > 0 && !check.PassesThrough(q.Ids)
	}
	return false
}

// leaseKey is the cache key a GET of path by q is stored under, and so
// the key of its lease, as replica 0's admin GET /cache names it: q's
// Host, its query (a read's own path only) and the headers a route may
// key on.
func (r *run) leaseKey(ctx context.Context, q *traffic.Request, path string) (string, error) {
	host := r.cfg.Host
	if q.Host != "" {
		host = q.Host
	}
	target := "http://" + host + path
	if path == q.Path && q.Query != "" && q.Kind != "list" {
		target += "?" + q.Query
	}
	v := url.Values{"url": {target}}
	for _, h := range []string{"Accept-Language", "X-Tenant"} {
		for _, val := range q.Hdr.Values(h) {
			v.Add("header", h+": "+val)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.cfg.Admins[0]+"/cache?"+v.Encode(), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+r.cfg.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /cache %s: %s", target, resp.Status)
	}
	var in struct{ Key string }
	if err := json.NewDecoder(resp.Body).Decode(&in); err != nil {
		return "", fmt.Errorf("GET /cache %s: %w", target, err)
	}
	if in.Key == "" {
		return "", fmt.Errorf("GET /cache %s: no key", target)
	}
	return in.Key, nil
}

// ghostBound is how long a read whose key's lease a crashed holder left
// may take: the lease's ttl (a batch route's: Config.BatchLeaseTTL) plus
// upstream.timeout, the takeover's fetch.
func (r *run) ghostBound(q *traffic.Request) time.Duration {
	ttl := r.cfg.LeaseTTL
	switch q.Route {
	case "u", "e", "s", "q":
		ttl = r.cfg.BatchLeaseTTL
	}
	return ttl + r.cfg.UpstreamTimeout
}

// checkGhost holds the answer of a request with a ghost lease to the
// row's own check: a read's is never the sidecar's 504. A list's ids take
// no lease (they join the batcher at once), so a list's failure is the
// collateral check's, not this one's.
func (r *run) checkGhost(q *traffic.Request, resp *http.Response) {
	r.chk.Count("ghost-lease-"+resp.Status[:3], 1)
	if q.Kind == "read" && resp.StatusCode == http.StatusGatewayTimeout && resp.Header.Get(origin.StampHeader) == "" {
		r.violate("ghost-lease", "%s: answered the sidecar's 504 (%s): its key's lease, left by a crashed holder, was waited on rather than taken over", q, resp.Header.Get("Cache-Status"))
	}
}
