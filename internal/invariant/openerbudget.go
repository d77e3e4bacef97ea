package invariant

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/origin"
)

// The batch-opener-budget row (PCG stream 58): once a seed, between
// rounds, on the promote-race row's gated replica (promote.go), a batch
// opened by a miss whose Redis budget is spent, joined by one whose is
// not. Route w is a batch route (max_wait 3 s, the origin's /u bulk
// endpoint) that only this row reads.
//
// The row holds the replies of the connection that reads id x's entry
// (PromoteGate's HoldNamed: the replica's other connections, its
// heartbeats among them, flow), and reads /w/x through the gated
// replica: its L2 read waits out redis.timeout, which spends the
// request's Redis budget (internal/redisbudget), and it opens a batch.
// Once the replica has counted that read failed (its
// sidecache_cache_lookups_total{tier="l2",result="error"}), the row
// releases the gate and reads /w/y through it: its own read is answered,
// it takes y's lease and joins x's batch, still open. The batch is every
// joiner's: its elements are stored as a one-id fill's would be, y's
// whatever x's budget.
//
// Checked (batch-opener-budget): once both are answered 200, Redis holds
// y's entry (read off Redis, within storeWithin). Stored with x's
// spent budget, it was dropped (l2.Store.Set refuses the store of a
// request whose budget Redis spent): y's lease was released with no
// fill, and every other replica fetched y again. Counted:
// batch-opener-budget (played), batch-opener-budget-unheld (x's read was
// never held), batch-opener-budget-late (x's read did not fail while
// held: nothing to check).

// openerRoute is the row's route's path; openerBase its first id (two a
// seed, below the crowd rounds' ids and above the ghost-lease row's).
const (
	openerRoute = "/w/"
	openerBase  = 48000
)

// openerRow is the row's state in a run.
type openerRow struct {
	rng *rand.Rand
	at  int // the round after which it plays (-1: never)
}

// drawOpenerRound draws the round after which the row plays, from stream
// 58 alone, so the other rows' draws are unchanged.
func (r *run) drawOpenerRound() {
	r.opener.rng, r.opener.at = rand.New(rand.NewPCG(r.cfg.Seed, 58)), -1
	if r.cfg.Mix.Has("batch-opener-budget") && r.cfg.PromoteGate != nil && r.cfg.L2Holds != nil && r.cfg.Rounds >= 4 {
		r.opener.at = r.opener.rng.IntN(r.cfg.Rounds - 1)
	}
}

// openerBudget plays the row after round (see above).
func (r *run) openerBudget(ctx context.Context, round int) {
	if round != r.opener.at {
		return
	}
	if r.oom.on {
		// Redis refuses every store while over maxmemory (oom.go).
		r.opener.at++
		return
	}
	// Plain elements, whatever the last round drew for the bulk endpoint
	// (private, Vary, too large: elements no call stores); the next
	// round draws its own.
	r.cfg.Origin.SetProfile(origin.BulkProfile, origin.Profile{})
	g := r.cfg.PromoteGate
	n := openerBase + 2*int(r.cfg.Seed%1000)
	x, y := fmt.Sprint(n), fmt.Sprint(n+1)
	failed := func() float64 {
		v, _ := readCounter(ctx, r.cfg.PromoteAdmin, func(line string) bool {
			return strings.HasPrefix(line, "sidecache_cache_lookups_total{") && strings.Contains(line, `tier="l2"`) && strings.Contains(line, `result="error"`)
		})
		return v
	}
	before := failed()
	g.HoldNamed(openerRoute + x)
	released := false
	release := func() {
		if !released {
			released = true
			g.Release()
		}
	}
	defer release()
	type answer struct {
		id   string
		code int
		err  error
	}
	answers := make(chan answer, 2)
	get := func(id string) {
		code, err := r.openerGet(ctx, openerRoute+id)
		answers <- answer{id, code, err}
	}
	go get(x)
	if !r.waitFor(ctx, g.Held) {
		r.chk.Count("batch-opener-budget-unheld", 1)
		release()
		<-answers
		return
	}
	if !r.waitFor(ctx, func() bool { return failed() > before }) {
		r.chk.Count("batch-opener-budget-late", 1)
		release()
		<-answers
		return
	}
	release()
	go get(y)
	for range 2 {
		a := <-answers
		if a.err != nil || a.code != http.StatusOK {
			r.violate("batch-opener-budget", "GET %s%s through the gated replica: %d %v, want 200", openerRoute, a.id, a.code, a.err)
			return
		}
	}
	r.chk.Count("batch-opener-budget", 1)
	// Read off Redis, not through a replica: on a Redis that has evicted
	// (evict-epochs), a new tag's first fill is stored but reads as a
	// miss (its epoch comes back at Redis's clock).
	for deadline := time.Now().Add(storeWithin); ctx.Err() == nil; time.Sleep(10 * time.Millisecond) {
		held, err := r.cfg.L2Holds(ctx, openerRoute+y)
		if err != nil {
			r.violate("harness", "reading Redis: %v", err)
			return
		}
		if held {
			return
		}
		if time.Now().After(deadline) {
			break
		}
	}
	r.violate("batch-opener-budget", "%s%s: its element, fetched in the batch %s%s opened with its Redis budget spent, never reached L2 (its lease released with no fill: every other replica fetches it again)",
		openerRoute, y, openerRoute, x)
}

// openerGet is one plain GET of path through the gated replica (Host
// the replicas' own): the row's two reads carry the same headers, so
// they share a batch group. Route w's answers are the origin's /u
// elements, stamped for route u's resource: not held to the stamp checks.
func (r *run) openerGet(ctx context.Context, path string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.cfg.PromoteReplica+path, nil)
	if err != nil {
		return 0, err
	}
	req.Host = r.cfg.Host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}
