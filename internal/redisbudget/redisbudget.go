// Package redisbudget carries one request's Redis budget in its context:
// the time all the Redis calls the request waits on may take together.
//
// Each call to Redis has its own deadline, l2.redis.timeout, but a request
// may wait on several one after another: a miss reads L2, then asks for
// the cluster lease; a write flushes the queued stores, then raises its
// tags' epochs and publishes. With Redis slow but within the timeout, each
// of them cost up to the timeout, and a request paid several (a prober
// saw a miss take 185 ms and a write 295 ms at a 100 ms timeout, where the
// SPEC promises "no added latency beyond timeout"). With a budget, every
// call the request waits on gets only what its predecessors left, and once
// it is spent the request goes on without Redis (as after a failed call:
// from L1 and the upstream), so a request never waits on Redis for longer
// than the timeout in total.
//
// The budget counts the time spent in calls, not the time since the first
// one: a miss's upstream fetch is not Redis's, and the stale copy a failed
// fetch falls back on is read with what the budget has left. A lease
// wait's polls are not charged either (Without): the wait is another
// replica's upstream fetch, bounded by the lease, and charging its polls
// sent a waiter of a slow upstream to fetch on its own after a few hundred
// quick ones; a request whose budget is already spent does not wait.
//
// A context carries the budget: New's, which is one allocation, or one
// held in an allocation the request makes anyway and answered by
// Budget.Value (the proxy holds a flight leader's in its flight, and With
// hands it to the calls the request makes after the flight), so that an
// L2 hit pays for no context of the budget's own.
package redisbudget

import (
	"context"
	"sync/atomic"
	"time"
)

// Budget is one request's Redis budget. The zero value has spent nothing.
type Budget struct {
	spent atomic.Int64 // ns spent in calls
}

// Left is what is left of a budget of limit.
func (b *Budget) Left(limit time.Duration) time.Duration {
	return limit - time.Duration(b.spent.Load())
}

// Spend records d spent in a call.
func (b *Budget) Spend(d time.Duration) {
	if d > 0 {
		b.spent.Add(int64(d))
	}
}

// Spent is the time spent in calls so far.
func (b *Budget) Spent() time.Duration { return time.Duration(b.spent.Load()) }

// Value is what a context holding b answers for Value(k): b for the key
// From asks, nil for any other. A context type of another package that
// holds a Budget in an allocation it makes anyway answers From with it
// this way: a flight's context carries the budget its leader made with
// the flight (coalesce.Flight.Carry), where New's context was one more
// allocation per L2 hit and per batched miss (issue 23).
func (b *Budget) Value(k any) any {
	if k == (key{}) {
		return b
	}
	return nil
}

type key struct{}

// budgetCtx is a context carrying a Budget: one allocation for both, where
// context.WithValue and a Budget would be two.
type budgetCtx struct {
	context.Context
	b Budget
}

func (c *budgetCtx) Value(k any) any {
	if k == (key{}) {
		return &c.b
	}
	return c.Context.Value(k)
}

// New returns ctx carrying a fresh budget; a ctx that carries one already
// is returned as it is, so that a request has one budget however many of
// its steps ask for it.
func New(ctx context.Context) context.Context {
	if From(ctx) != nil {
		return ctx
	}
	return &budgetCtx{Context: ctx}
}

// With returns ctx carrying b: for a request's calls after its flight's
// (its own fetch, a stale copy's read), which share the budget the flight
// was charged. A ctx that carries b already is returned as it is.
func With(ctx context.Context, b *Budget) context.Context {
	if From(ctx) == b {
		return ctx
	}
	return &heldCtx{Context: ctx, b: b}
}

// heldCtx is With's context: a budget held elsewhere.
type heldCtx struct {
	context.Context
	b *Budget
}

func (c *heldCtx) Value(k any) any {
	if k == (key{}) {
		return c.b
	}
	return c.Context.Value(k)
}

// From is ctx's budget, nil when it carries none (a background call: the
// writer, a heartbeat, a replay), which has each call's own timeout only.
func From(ctx context.Context) *Budget {
	b, _ := ctx.Value(key{}).(*Budget)
	return b
}

// Without is ctx without its budget: the calls made with it have each the
// plain timeout and charge nothing. For waits whose length is not Redis's:
// a lease wait's polls wait on another replica's upstream fetch.
func Without(ctx context.Context) context.Context {
	if From(ctx) == nil {
		return ctx
	}
	return withoutCtx{ctx}
}

type withoutCtx struct{ context.Context }

func (c withoutCtx) Value(k any) any {
	if k == (key{}) {
		return nil
	}
	return c.Context.Value(k)
}
