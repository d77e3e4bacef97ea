package invariant

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// Retry rounds (list-crowd-retry, PCG stream 69): a call shared by many
// lists that fails for one bad id is retried once per list, each retry
// holding that list's ids again (internal/batch partitionLocked), so the
// queue of a group fills with lists' retries far past its bound though
// the lists named two distinct ids. A one-id read of a good id that
// reaches the loader then must find the quarter of the queue kept for
// one-id misses: the lists' retries are lists' ids (listShare). Counted
// as one-id misses' ids, they had the read refused 503 "upstream busy"
// for another client's bad id (the all-features soak's crowd round, seed
// 1000, on a loaded machine: 932 ids queued in route u's group, bounded
// at 896).
//
// On route q (max_size 2, max_in_flight 1: a queue of 28 ids, 7 of them
// one-id misses' own), with the bulk endpoint held: per replica, one
// list of two fresh good ids makes the call that holds the group's slot;
// once each replica's call reached the origin, retryLists lists of the
// same two ids, a bad one and a good one, go, and, once they have had
// retryEnlist to reach their replica, the endpoint is let go. Their one
// shared call fails, and its retryLists retries (2 ids each) are queued;
// once each replica's first retry reached the origin, retryReads one-id
// reads of fresh good ids go per replica. Each must answer 200 (a 504
// only if its batch missed its deadline), never 503.
//
// And the retries must keep the queue's bound (queue-retry-bound): 24
// retries of the same two ids would queue 48 ids in a group bounded at
// 28, so the failed call's ids are retried once (internal/batch
// classesLocked), not once per list. The origin counts the /q calls
// that held each replica's bad id: at most retryBadCalls (its lists'
// shared call and the halving of its retry, as many again for lists late
// enough to open a batch of their own); one retry per list sent it in
// one call per list, 24 and more.
//
// A retry round goes beside an ordinary round (after it), on a sequence
// of draws of its own, with the crowd ids of its round number (no crowd
// or queue round plays them), so its bulk calls count as that round's.

const (
	retryEvery  = 80 // a retry round beside every 80th round, from retryFirst
	retryFirst  = 40 // the fixed seeds' (110 rounds) and the soak's (50) round 40
	retryLists  = 24 // lists of the bad id and a good one, per replica: 48 ids retried
	retryReads  = 4  // one-id reads per replica, within the misses' own 7 ids
	retryEnlist = 300 * time.Millisecond
	retryDelay  = 10 * time.Millisecond
	// retryBadCalls is the most /q calls that may hold one replica's
	// bad id: 2 for the lists' shared call and its halving, twice over.
	retryBadCalls = 4
)

// retryDue reports whether a retry round goes beside round (0-based).
func (r *run) retryDue(round int) bool {
	return r.cfg.Mix.Has("list-crowd-retry") && round%retryEvery == retryFirst
}

// retryRound plays one retry round beside round.
func (r *run) retryRound(ctx context.Context, round int) {
	r.rep.Rounds++
	rng := rand.New(rand.NewPCG(r.cfg.Seed, 69))
	o := r.cfg.Origin
	hold := make(chan struct{})
	o.SetProfile(origin.QueueBulkProfile, origin.Profile{Delay: retryDelay, Hold: hold})
	defer o.SetProfile(origin.QueueBulkProfile, origin.Profile{})
	next := 0
	fresh := func() string {
		next++
		return origin.CrowdID(round, next-1)
	}
	list := func(ids []string, replica int, after chan struct{}) *traffic.Request {
		q := r.gen.CrowdRequest(rng)
		q.Kind, q.Route, q.Path, q.Replica, q.Ids, q.After = "list", "q", "/q", replica, ids, after
		q.Query = "ids=" + strings.Join(ids, ",")
		q.Budget = traffic.BudgetList(len(ids))
		return q
	}
	listed, retried := make(chan struct{}), make(chan struct{})
	var reqs, reads []*traffic.Request
	var bads []string
	for i := range r.cfg.Replicas {
		reqs = append(reqs, list([]string{fresh(), fresh()}, i, nil))
	}
	for i := range r.cfg.Replicas {
		ids := []string{origin.CrowdBadID(round, rng.Uint64()), fresh()}
		bads = append(bads, ids[0])
		for range retryLists {
			reqs = append(reqs, list(ids, i, listed))
		}
		for range retryReads {
			q := r.gen.CrowdRequest(rng)
			q.Route, q.Replica, q.Path, q.After = "q", i, "/q/"+fresh(), retried
			q.Res = origin.Resource(q.Path)
			reads = append(reads, q)
		}
	}
	reqs = append(reqs, reads...)
	// Its ids are the same in every seed: one environment that plays
	// several (the soak) holds them from the last.
	if !r.purgeRoute(ctx, "q") {
		close(hold)
		return
	}
	base := o.QueueCalls.Load()
	replicas := int64(len(r.cfg.Replicas))
	go func() {
		// Counts, not time, but for the lists' way to their replica,
		// which no count shows: a list later than retryEnlist opens a
		// batch of its own, and its retries are fewer. The limits only
		// end a round whose calls never came (its answers show it).
		waitCalls := func(n int64) {
			for limit := time.Now().Add(5 * time.Second); o.QueueCalls.Load() < base+n && time.Now().Before(limit) && ctx.Err() == nil; {
				time.Sleep(time.Millisecond)
			}
		}
		waitCalls(replicas) // each replica's holding call
		close(listed)
		time.Sleep(retryEnlist)
		close(hold)
		waitCalls(3 * replicas) // and its lists' shared call, and the first retry
		close(retried)
	}()
	r.play(ctx, reqs, round)
	for _, q := range reads {
		switch q.Got {
		case 0, http.StatusOK, http.StatusGatewayTimeout:
			// No answer: the sender reported it. A 504: its batch not
			// sent by its deadline (a loaded machine).
		default:
			r.violate("queue-retry", "%s: a one-id read of a good id answered %d while lists' isolation retries held route q's queue: the one-id misses' quarter is theirs whatever the lists hold", q, q.Got)
		}
	}
	r.chk.Count("queue-retry", len(reads))
	// Every list answered, so every call that held its bad id came: the
	// id's result settles only when the last call holding it failed.
	for i, bad := range bads {
		n := o.QueueCallsWith(bad)
		r.chk.Count("queue-retry-bad-calls", n)
		if n > retryBadCalls {
			r.violate("queue-retry-bound", "replica %d: %d /q calls held the bad id %s that %d lists shared, want at most %d: a failed call's retries hold its ids once, not once per list (%d lists' retries of 2 ids each in route q's queue of 28)", i, n, bad, retryLists, retryBadCalls, retryLists)
		}
	}
	r.chk.Count("queue-retry-bound", len(bads))
}
