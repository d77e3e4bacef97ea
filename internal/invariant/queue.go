package invariant

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/check"
	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// Queue rounds (list-crowd-queue): the batch queue's refusals and fair
// order. Crowd rounds reach a group's queue bound (route u's is
// 14 × 32 × 2 ids over a pool of 48 or 96) only through lists' isolation
// retries (list-crowd-bad; retry.go); route q's batch (max_size 2,
// max_in_flight 1) bounds it at 28 ids, of which lists may hold 21
// (internal/batch listShare) and one-id misses the rest. Each queue round
// sends, first, one list of queueHold fresh ids per replica: an idle
// group admits any one request, so it is enlisted whole and holds the
// queue past the bound while its calls go, one at a time, queueDelay each.
// Once every replica's first call reached the origin, the second wave
// goes at once: lists and one-id reads of ids no other request names. The
// lists find the queue full and are refused; the first one-id reads find
// the quarter kept for them, jump the held list's queued batches every
// other call (jumpLocked), and answer. check.Queue holds every answer to
// a 200 (checked as any other), a 503 with Retry-After or a 504, the
// one-id reads to their share, and sidecache_batch_dropped_total to the
// refusals the clients saw: every id of the round is fresh and named
// once, so a refused list counts its every id and a refused read one.
//
// A queue round goes beside an ordinary round (after it), on a sequence
// of draws of its own: the other rounds draw what they drew without it.
// Its bulk calls are counted as a crowd round's (origin.CrowdRound: its
// ids are the crowd ids of its round number, which no crowd round plays).

const (
	queueEvery = 80 // a queue round beside every 80th round, from queueFirst
	queueFirst = 30 // the fixed seeds' (110 rounds) and the soak's (50) round 30
	queueHold  = 40 // the first list's ids: over MaxQueued (28) + one call
	queueLists = 24 // the second wave's lists, of 4-12 ids
	queueReads = 16 // and its one-id reads
	queueDelay = 25 * time.Millisecond
)

// queueDue reports whether a queue round goes beside round (0-based).
func (r *run) queueDue(round int) bool {
	return r.cfg.Mix.Has("list-crowd-queue") && len(r.cfg.Admins) == len(r.cfg.Replicas) &&
		round%queueEvery == queueFirst
}

// queueRound plays one queue round beside round.
func (r *run) queueRound(ctx context.Context, round int) {
	r.rep.Rounds++
	rng := rand.New(rand.NewPCG(r.cfg.Seed, 4000+uint64(round)))
	o := r.cfg.Origin
	o.SetProfile(origin.QueueBulkProfile, origin.Profile{Delay: queueDelay})
	next := 0
	fresh := func(n int) []string {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = origin.CrowdID(round, next)
			next++
		}
		return ids
	}
	list := func(ids []string, replica int) *traffic.Request {
		q := r.gen.CrowdRequest(rng)
		q.Kind, q.Route, q.Path, q.Replica, q.Ids = "list", "q", "/q", replica, ids
		q.Query = "ids=" + strings.Join(ids, ",")
		// max_size 2: a list's first calls are ⌈n/2⌉ by design, more
		// than BudgetList allows a list of one call per max_size 32.
		q.Budget = max(traffic.BudgetList(len(ids)), (len(ids)+1)/2+2)
		return q
	}
	gate := make(chan struct{})
	var reqs []*traffic.Request
	for i := range r.cfg.Replicas {
		reqs = append(reqs, list(fresh(queueHold), i))
	}
	for range queueLists {
		q := list(fresh(4+rng.IntN(9)), rng.IntN(len(r.cfg.Replicas)))
		q.After = gate
		reqs = append(reqs, q)
	}
	for range queueReads {
		q := r.gen.CrowdRequest(rng)
		q.Route, q.Path = "q", "/q/"+fresh(1)[0]
		q.Res, q.After = origin.Resource(q.Path), gate
		reqs = append(reqs, q)
	}
	// Its ids are the same in every seed: one environment that plays
	// several (the soak) holds them from the last, and an id read from
	// the cache is neither enlisted nor counted when its list is refused.
	if !r.purgeRoute(ctx, "q") {
		return
	}
	before := r.dropped(ctx)
	base := o.QueueCalls.Load()
	go func() {
		// Counts, not time: the held lists are enlisted before their
		// first call is made. The limit only ends a round whose lists
		// never called (which their own answers then show).
		defer close(gate)
		for limit := time.Now().Add(5 * time.Second); o.QueueCalls.Load() < base+int64(len(r.cfg.Replicas)) && time.Now().Before(limit) && ctx.Err() == nil; {
			time.Sleep(time.Millisecond)
		}
	}()
	r.play(ctx, reqs, round)
	after := r.dropped(ctx)
	if before == nil || after == nil {
		return
	}
	r.chk.Queue(reqs, before, after)
	r.chk.Count("queue", len(reqs))
}

// purgeRoute drops route's entries on every replica (POST
// /purge?route=), and reports whether each said so.
func (r *run) purgeRoute(ctx context.Context, route string) bool {
	for i, a := range r.cfg.Admins {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a+"/purge?route="+route, nil)
		if err != nil {
			r.violate("harness", "replica %d: purge: %v", i, err)
			return false
		}
		req.Header.Set("Authorization", "Bearer "+r.cfg.AdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			r.violate("harness", "replica %d: purge: %v", i, err)
			return false
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			r.violate("harness", "replica %d: purge: %s", i, resp.Status)
			return false
		}
	}
	return true
}

// dropped reads sidecache_batch_dropped_total of route q from every
// replica's /metrics (nil when one cannot be read: a harness violation).
func (r *run) dropped(ctx context.Context) []check.Dropped {
	out := make([]check.Dropped, len(r.cfg.Admins))
	for i, a := range r.cfg.Admins {
		d, err := readDropped(ctx, a, "q")
		if err != nil {
			r.violate("harness", "replica %d: /metrics: %v", i, err)
			return nil
		}
		out[i] = d
	}
	return out
}

// readDropped reads the dropped counts of route from the Prometheus
// exposition at admin's /metrics.
func readDropped(ctx context.Context, admin, route string) (check.Dropped, error) {
	var d check.Dropped
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/metrics", nil)
	if err != nil {
		return d, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return d, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return d, fmt.Errorf("status %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "sidecache_batch_dropped_total{") || !strings.Contains(line, `route="`+route+`"`) {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			return d, fmt.Errorf("%q: %w", line, err)
		}
		switch {
		case strings.Contains(line, `reason="queue-full"`):
			d.QueueFull = int64(v)
		case strings.Contains(line, `reason="deadline"`):
			d.Deadline = int64(v)
		case strings.Contains(line, `reason="abandoned"`):
			d.Abandoned = int64(v)
		}
	}
	return d, sc.Err()
}
