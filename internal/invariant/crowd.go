package invariant

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/check"
	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// Crowd rounds: many concurrent split-list requests over a pool of ids no
// earlier round used (so every list loads through the batcher, not the
// cache), with one-id reads of the same ids, against a bulk endpoint that
// is slow but healthy: no bad id, no failure. Every answer must then be a
// 200; a 502 or 504 (a list's call budget spent joining other requests'
// batches, say) is collateral. A round of a few requests never piles a
// list's ids into many pending batches at once: make bench's 200
// concurrent lists did, and found what the ordinary rounds missed.
//
// A crowd round takes the place of an ordinary round every crowdEvery
// rounds, with its own generator (seeded by the seed and the round), so
// the ordinary rounds draw what they drew without it.

// crowdShape is the size of a crowd round.
type crowdShape struct {
	every        int // a crowd round every this many rounds
	lists, reads int // concurrent list requests and one-id reads
	pool         int // distinct fresh ids they share
	minIDs       int // ids per list: minIDs up to pool/2
}

var (
	// crowdSmall is the default mix's: rare and small enough to keep the
	// fixed seeds' wall time, large enough to spread a list's ids over
	// several pending batches.
	crowdSmall = crowdShape{every: 22, lists: 60, reads: 20, pool: 48, minIDs: 12}
	// crowdLarge (list-crowd-large: INVARIANT_FEATURES=all, soak) is make
	// bench's shape scaled to the harness.
	crowdLarge = crowdShape{every: 8, lists: 200, reads: 50, pool: 96, minIDs: 12}
)

// hostsReads is how many one-id reads batch-hosts adds to a crowd round,
// each under a Host of its own: four times route u's bound, so that
// groups bounded one by one would show past it.
const hostsReads = 32

// routeUserCalls is route u's batch.max_route_in_flight: unset in the
// harness's config, four groups' max_in_flight (2).
const routeUserCalls = 4 * 2

// checkUserBulk checks that the /u bulk endpoint carried no more calls at
// once during crowd round round than the replicas' route u may make
// between them (batch-hosts): a batch group per Host spelling must not
// multiply them. Only in a round whose bulk answers are shared: a
// member of a bulk call answered for another's address fetches its own
// (bulk-per-address), a call per client request the budget bounds,
// outside any batch group.
func (r *run) checkUserBulk(round int) {
	bound := int64(len(r.cfg.Replicas) * routeUserCalls)
	if h := r.cfg.Origin.UserBulkHigh.Load(); h > bound {
		r.violate("route-calls", "crowd round %d: the /u bulk endpoint carried %d calls at once, want at most %d (%d replicas × max_route_in_flight %d)", round, h, bound, len(r.cfg.Replicas), routeUserCalls)
	}
	r.chk.Count("route-calls-checked", 1)
}

func (r *run) crowdShape() (crowdShape, bool) {
	switch m := r.cfg.Mix; {
	case m.Has("list-crowd-large"):
		return crowdLarge, true
	case m.Has("list-crowd") && m.Has("batch"):
		return crowdSmall, true
	}
	return crowdShape{}, false
}

// crowdDue reports whether round (0-based) is a crowd round.
func (r *run) crowdDue(round int) bool {
	s, ok := r.crowdShape()
	return ok && round%s.every == s.every-1
}

// crowd plays one crowd round.
func (r *run) crowd(ctx context.Context, round int) {
	s, _ := r.crowdShape()
	r.rep.Rounds++
	rng := rand.New(rand.NewPCG(r.cfg.Seed, 3000+uint64(round)))
	// Ids no other round draws: ordinary rounds use 1-64.
	pool := make([]string, s.pool)
	for i := range pool {
		pool[i] = origin.CrowdID(round, i)
	}
	bulk := origin.Profile{
		Gzip:  r.cfg.Mix.Has("bulk-vary-gzip") && rng.IntN(2) == 0,
		Delay: time.Duration(10+rng.IntN(40)) * time.Millisecond,
	}
	if r.cfg.Mix.Has("bulk-per-address") && rng.IntN(2) == 0 {
		// Many clients' ids share each bulk call here, where an ordinary
		// round's few requests rarely meet in one: every member but the
		// opener must fetch its own answer, within its budget.
		bulk.Dims = []origin.Dim{{Name: "addr", How: []string{"vary", "private"}[rng.IntN(2)]}}
	}
	r.cfg.Origin.SetProfile(origin.BulkProfile, bulk)
	reqs := make([]*traffic.Request, 0, s.lists+s.reads)
	// Every other crowd round, with list-crowd-bad: isolating bad ids
	// behind a slow bulk endpoint is what makes a crowd round long.
	bad := r.cfg.Mix.Has("list-crowd-bad") && round/s.every%2 == 1
	for range s.lists {
		q := r.gen.CrowdRequest(rng)
		q.Kind, q.Path = "list", "/u"
		n := s.minIDs + rng.IntN(s.pool/2-s.minIDs+1)
		for _, i := range rng.Perm(s.pool)[:n] {
			q.Ids = append(q.Ids, pool[i])
		}
		if bad && rng.IntN(20) == 0 {
			// A list of its own bad id, spliced in among good ones:
			// it may fail; the good lists sharing its batches may not.
			at := rng.IntN(len(q.Ids) + 1)
			q.Ids = append(q.Ids[:at], append([]string{origin.CrowdBadID(round, rng.Uint64())}, q.Ids[at:]...)...)
			n++
		}
		q.Query = "ids=" + strings.Join(q.Ids, ",")
		q.Budget = traffic.BudgetList(n)
		// A list whose client leaves while its batches wait: the ones
		// only it waits on go unsent; the others must still answer
		// every other request (collateral).
		q.Hangup = r.cfg.Mix.Has("list-crowd-hangup") && rng.IntN(8) == 0
		if q.Hangup {
			r.chk.Count("crowd-hangup", 1)
		}
		reqs = append(reqs, q)
	}
	for range s.reads {
		q := r.gen.CrowdRequest(rng)
		q.Path = "/u/" + pool[rng.IntN(s.pool)]
		q.Res = origin.Resource(q.Path)
		reqs = append(reqs, q)
	}
	if r.cfg.Mix.Has("batch-hosts") {
		// Drawn from a sequence of their own, after the others: the
		// row moves no draw of the crowd round's.
		hr := rand.New(rand.NewPCG(r.cfg.Seed, 4000+uint64(round)))
		for i := range hostsReads {
			q := r.gen.CrowdRequest(hr)
			q.Replica = 0
			q.Host = fmt.Sprintf("h%d.%s", i, r.cfg.Host)
			q.Path = "/u/" + pool[hr.IntN(s.pool)]
			q.Res = origin.Resource(q.Path)
			reqs = append(reqs, q)
		}
	}
	rng.Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })
	began := check.Now()
	for _, q := range reqs {
		q.Began = began
	}
	hosts := r.cfg.Mix.Has("batch-hosts") && len(bulk.Dims) == 0
	if hosts {
		r.cfg.Origin.UserBulkHigh.Store(r.cfg.Origin.UserBulk.Load())
	}
	r.play(ctx, reqs, round)
	if hosts {
		r.checkUserBulk(round)
	}
	r.chk.Count("crowd", len(reqs))
}
