package invariant

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// play sends a round's requests all at once, checks each answer, and
// checks the round's upstream calls against the sum of their budgets.
func (r *run) play(ctx context.Context, reqs []*traffic.Request, crowd int) {
	r.playWith(ctx, reqs, crowd, nil)
}

// playWith is play with an admin purge sent beside the requests (p, when
// not nil): it is over before the round's calls are counted.
func (r *run) playWith(ctx context.Context, reqs []*traffic.Request, crowd int, p *purgeDraw) {
	r.playAll(ctx, reqs, crowd, p, nil)
}

// playAll is playWith with a Redis fault among the requests as well
// (mid, when not nil: a restart or a stall, mid.go), over before the
// round's calls are counted.
func (r *run) playAll(ctx context.Context, reqs []*traffic.Request, crowd int, p *purgeDraw, mid midRound) {
	n, budget := len(reqs), 0
	for _, q := range reqs {
		budget += q.Budget
	}
	o := r.cfg.Origin
	o.NewRound()
	before, resent, crowds := o.Calls.Load(), o.Resends.Load(), o.CrowdCalls.Load()
	answered, purged := make(chan struct{}), make(chan struct{})
	if p != nil {
		go func() {
			defer close(purged)
			r.purge(ctx, p, answered)
		}()
	} else {
		close(purged)
	}
	wided := make(chan struct{})
	if w := r.wide; w != nil && crowd < 0 {
		go func() {
			defer close(wided)
			r.purgeWide(ctx, w, answered)
		}()
	} else {
		close(wided)
	}
	var wg sync.WaitGroup
	for _, q := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if mid != nil {
				defer mid.answered(q)
			}
			if q.After != nil {
				select {
				case <-q.After:
				case <-ctx.Done():
					return
				}
			}
			r.do(ctx, q)
		}()
	}
	if mid != nil {
		mid.play(ctx, r) // on this goroutine, the test's
	}
	wg.Wait()
	close(answered)
	<-purged
	<-wided
	for _, q := range reqs {
		// A PATCH * is the sidecar's 400 (send.go, doAsterisk), never
		// forwarded: waiting for it held its round 5 s.
		// Nor a lower-case patch, the sidecar's 400 too (methodcase.go).
		if q.Method == http.MethodPatch && !q.Asterisk && !q.Folded && q.Override != "lower" {
			r.patches++
		}
	}
	for deadline := time.Now().Add(5 * time.Second); r.cfg.Origin.Writes.Load() < r.patches; {
		if time.Now().After(deadline) {
			r.patches = r.cfg.Origin.Writes.Load() // never forwarded: resync
			break
		}
		time.Sleep(time.Millisecond) // a hung-up write still on its way
	}
	r.settle()
	r.rep.Requests += n
	// A resend (the same request once more after the origin hung up on a
	// reused connection, RFC 9112 §9.3.1) is not another upstream request
	// of the client's: it is bounded by its own check (MaxSends per
	// request id), not by the budget, which counts requests. Without that
	// bound the sidecar's transport resent one fetch on every idle
	// connection.
	for _, id := range o.NewRound() {
		r.violate("resend", "%s sent more than %d times", id, origin.MaxSends)
	}
	// A call of an earlier round that arrives late is still one too many.
	for _, call := range o.TakeHops() {
		r.violate("connection-hop", "upstream call %s carried %s, which a client's Connection named", call, origin.ClientHop)
	}
	for _, call := range o.TakeUnderscored() {
		r.violate("underscore-forwarding", "upstream call %s carried an underscore spelling of a field the sidecar writes or keys on, or a client's address claim", call)
	}
	for _, call := range o.TakeMethodCases() {
		r.violate("method-case", "upstream call %s: a known method spelled with a lower-case letter, which the sidecar refuses unsent (an app that folds case applies it as the method it spells)", call)
	}
	for _, call := range o.TakeExpects() {
		r.violate("expect", "upstream call %s carried a client's Expect, which the sidecar answers itself", call)
	}
	// A crowd round's bulk calls are its own whenever they arrive (the
	// origin tells them by their ids): a batch a round queued may still
	// be sent after the round's last answer, such as one list's retry
	// whose ids other lists' retries answered first. The other calls
	// received meanwhile are this round's.
	used := (o.Calls.Load() - before) - (o.Resends.Load() - resent) - (o.CrowdCalls.Load() - crowds)
	c := roundCost{n: n, used: used, budget: int64(budget), reqs: reqs}
	if crowd >= 0 {
		// Its own calls are added up once the run is over (checkCrowds).
		c.crowd, c.ended = crowd, o.CrowdCallsOf(crowd)
		r.crowds = append(r.crowds, c)
		return
	}
	r.checkBudget(c)
}

// settleQuiet is how long the origin must have been idle before a round
// with a client gone ends (settle): the late calls seen arrive within a
// millisecond of the client seeing its connection closed.
const settleQuiet = 100 * time.Millisecond

// settle holds a round whose client left before its answer until the
// origin is idle. Such a request's fetch goes on without it (its flight
// serves the others, and may fill the cache), and may reach the origin
// after the client saw its connection closed, which can be after the
// round's last answer. It is this round's call; counted in the next
// round's, it overran that round's budget (a round of one GET /k/2,
// budget 2, counted 3 calls: the fetches of the round before's two
// half-closed reads, which reached the origin 0.2 ms after it began).
// Checked's settled-late-calls counts the calls that came while it held.
func (r *run) settle() {
	if r.gone.Swap(0) == 0 {
		return
	}
	r.chk.Count("settled-late-calls", int(r.cfg.Origin.Settle(settleQuiet, 5*time.Second)))
}

// roundCost is a round's upstream calls against its budget.
type roundCost struct {
	n            int
	used, budget int64
	crowd        int   // the crowd round's number, whose bulk calls add to used
	ended        int64 // of which received by its last answer
	reqs         []*traffic.Request
}

func (r *run) checkBudget(c roundCost) {
	if r.rep.MaxRoundBudget == 0 || c.used*r.rep.MaxRoundBudget > r.rep.MaxRound*c.budget {
		r.rep.MaxRound, r.rep.MaxRoundBudget = c.used, c.budget
	}
	if c.used > c.budget {
		var what []string
		for _, q := range c.reqs {
			what = append(what, q.String())
		}
		r.violate("budget", "round of %d requests cost %d upstream calls, budget %d: %s", c.n, c.used, c.budget, strings.Join(what, " | "))
	}
}

// crowdDrain is how long the origin must have received no crowd round's
// call before the run adds up the crowd rounds' calls: the batches a
// crowd round queued go within the bulk endpoint's delay (at most 50 ms)
// per call in flight, long before. A call later still would go uncounted
// (it could hide a violation, never make one).
const crowdDrain = time.Second

// checkCrowds checks each crowd round's calls, its own bulk calls
// included, against its budget, once no more arrive.
func (r *run) checkCrowds() {
	if len(r.crowds) == 0 {
		return
	}
	o := r.cfg.Origin
	last, since := o.CrowdCalls.Load(), time.Now()
	for deadline := since.Add(10 * crowdDrain); time.Since(since) < crowdDrain && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		if n := o.CrowdCalls.Load(); n != last {
			last, since = n, time.Now()
		}
	}
	for _, c := range r.crowds {
		own := o.CrowdCallsOf(c.crowd)
		// Checked shows how many arrived after the round's last answer.
		r.chk.Count("crowd-late-calls", int(own-c.ended))
		c.used += own
		r.checkBudget(c)
	}
}

var tNames = []string{"plain", "caf%E9"}
