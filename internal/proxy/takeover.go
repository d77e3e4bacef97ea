package proxy

import (
	"context"
	"fmt"
	"net/http"

	"github.com/sidecache/sidecache/internal/batch"
	"github.com/sidecache/sidecache/internal/bulkanswer"
	"github.com/sidecache/sidecache/internal/lease"
	"github.com/sidecache/sidecache/internal/upfail"
)

// A replica that holds the cluster leases of many ids of a batch route
// fetches them in one bulk call. When it dies, its leases lapse, and the
// replicas waiting on them take them over (internal/lease): each waiter
// found its own lease lapsed on its own poll, 2-20 ms after the others,
// and joined a batch on its own, so the ids the dead replica would have
// fetched in one call went out in 5-10 calls of 1-10 ids from each
// survivor. The route's takeovers gather them instead (lease.Sweep): the
// first waiter that sees a lease lapse takes over at once every lease the
// route's waiters on this replica wait on that is free by then, and
// their ids reach the batcher together (batch.Loader.LoadAllTo): one
// batch per group (per max_size ids), whatever the polls' timing. Each id
// stays a one-id request there: its own isolation retry with its own
// headers (RetryArg), the quarantine of a bad id, the queue's bounds, and
// a private answer its own only when the call carried its headers
// (bulkanswer.Answer.NotFor), as a batched miss's.

// takeoverAnswer is the batcher's outcome for a taken-over id.
type takeoverAnswer struct {
	ans   *bulkanswer.Answer
	found bool
	err   error
}

type (
	takeovers     = lease.Sweep[*exchange, takeoverAnswer]
	takeoverClaim = lease.Claim[*exchange, takeoverAnswer]
)

// newTakeovers is a batch route's takeovers.
func newTakeovers() *takeovers { return lease.NewSweep(loadTakeovers) }

// loadTakeovers loads the ids of the leases one round took over, those
// of each group (what the requests forward: never another client's
// headers on a call) at once. Each claim is finished by its id's load
// (takeoverLoad.Loaded), once the batch has stored its element.
func loadTakeovers(ctx context.Context, claims []*takeoverClaim) {
	var order []string
	groups := make(map[string][]*takeoverClaim)
	for _, c := range claims {
		g := c.Arg.rs.fwd.group(c.Arg.r)
		if _, seen := groups[g]; !seen {
			order = append(order, g)
		}
		groups[g] = append(groups[g], c)
	}
	for _, g := range order {
		cs := groups[g]
		ids := make([]string, len(cs))
		ws := make([]batch.Waiter[*bulkanswer.Answer], len(cs))
		for i, c := range cs {
			ids[i] = c.Arg.params.Get(c.Arg.rs.rt.Batch.IDParam)
			ws[i] = takeoverLoad{c}
		}
		// The claim's Arg is the waiter's copy (lease.TakeIn's arg),
		// which nothing else writes: the batch it opens makes its call
		// with it.
		opener := cs[0].Arg
		opener.rs.batcher.LoadAllTo(ctx, g, func() *exchange { return opener }, ids, ws)
	}
}

// takeoverLoad is the batch's waiter for one taken-over id.
type takeoverLoad struct{ c *takeoverClaim }

// Loaded finishes the claim, on the batch's goroutine: its lease goes
// with leasePass's verdict (hit-for-pass when the answer may not be
// stored), after fetchBulk stored the element.
func (t takeoverLoad) Loaded(ans *bulkanswer.Answer, found bool, err error) {
	x := t.c.Arg
	f, ferr := batchedFlight(x.h.now, new(flight), ans, found, err)
	t.c.Done(takeoverAnswer{ans: ans, found: found, err: err}, x.leasePass(f, ferr))
}

// RetryArg is the exchange of the id's isolation retry: its own
// request's call, as a batched miss's (lead.RetryArg).
func (t takeoverLoad) RetryArg(opener *exchange) *exchange {
	m := lead{req: t.c.Arg.r}
	return m.RetryArg(opener)
}

// takenOver is the flight of a batched miss whose lease a round took
// over (fillBatched): the batch's answer for its id, as loadBatched
// makes it. A load that failed without an answer (lease.ErrLoadPanicked)
// is the id's 502.
func (x *exchange) takenOver(ctx context.Context, c *takeoverClaim) (*flight, error) {
	a, err := c.Wait(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, err
	case err != nil:
		return nil, &upfail.Error{Code: http.StatusBadGateway, Err: fmt.Errorf("lease takeover: %w", err)}
	}
	f, err := batchedFlight(x.h.now, new(flight), a.ans, a.found, a.err)
	if err == nil {
		f.foreign = a.ans.NotFor(f.c.private, x.r.Header)
	}
	return f, err
}
