package proxy

import (
	"context"
	"time"

	"github.com/sidecache/sidecache/internal/lease"
)

// leases reports whether this request's miss takes the cluster lease
// before it calls the upstream or joins a batch: with the shared tier's
// lease on, and unless it is a forced refresh (it must fetch), an own
// fetch (the lease's fill would not answer it), or its own read of the
// shared tier just failed: Redis is down or slow, and asking it for the
// lease would add a second redis.timeout to the miss before the breaker
// opens (README, "Redis down or slow": nothing added beyond the timeout).
func (x *exchange) leases(readFailed bool) bool {
	return x.h.leaser != nil && !x.refresh && !x.own && !readFailed
}

// fillBatched is fillUpstream for a batch route's miss: through the
// route's batcher, after the key's cluster lease when it takes one
// (leases), so that a cold id costs one upstream fetch for the cluster,
// as a plain key does. An id whose lease another replica holds waits for
// that replica's fill instead of joining a bulk call; an id whose lease
// this replica took joins a batch as any other, and its lease is
// released once the batch has stored its element (fetchBulk stores every
// element before it answers an id). One lease per id, each on its
// flight's own goroutine, so the ids of a batch take theirs at once
// rather than one round trip after another.
func (x *exchange) fillBatched(ctx context.Context, stale candidate, readFailed bool) (*flight, error) {
	if x.own {
		return x.fetchOwnID(ctx) // foreign.go
	}
	if !x.leases(readFailed) {
		return x.loadBatched(ctx) // batch.go
	}
	// As a plain miss's: the wait ends at the lease's ttl (leaseTTL), its
	// renewals at release, once the batch has answered the id, which its
	// queue's deadline and its bulk call's timeout bound.
	f, release := x.clusterLease(ctx, stale)
	if f != nil {
		return f, nil
	}
	defer release()
	return x.loadBatched(ctx)
}

// clusterLease makes this flight's miss one upstream call for the whole
// cluster (internal/lease): it takes the key's lease in the shared tier,
// or waits for the holder's fill. It returns a flight when another
// replica's fill answers the request (the fit rule, answers). Otherwise
// the caller fetches, and calls release once its answer is stored, to let
// the waiters go (a no-op unless this replica took the lease).
func (x *exchange) clusterLease(ctx context.Context, stale candidate) (*flight, func()) {
	ttl := x.leaseTTL()
	// Wait for an entry newer than the stale copy in hand: the holder's
	// fetch, not the copy that made this a miss.
	var newer time.Time
	if stale.e != nil {
		newer = stale.e.StoredAt
	}
	f, _, release := lease.Take(ctx, x.h.leaser, x.key, ttl, newer, x.filled, x.rs.m.LeaseTakeover)
	return f, release
}

// leaseTTL is how long a lease holds, and so how long a miss waits for a
// live holder of its key's lease before it fetches itself:
// cache.l2.lease_ttl (by default upstream.timeout, the longest a
// holder's fetch may take). A batched holder's may take longer: its id
// may wait in its group's queue up to the queue's deadline (max_wait +
// upstream.timeout: batcher) before its bulk call, so a batched id's
// lease holds at least max_wait + 2 × upstream.timeout. A waiter that
// gave up sooner fetched the id a second time while the holder's call
// was on its way.
func (x *exchange) leaseTTL() time.Duration {
	ttl := x.h.leaseTTL
	if ttl <= 0 {
		ttl = x.st.timeout
	}
	if x.batched() {
		ttl = max(ttl, x.rs.rt.Batch.MaxWait+2*x.st.timeout)
	}
	return ttl
}

// filled is the flight of another replica's fill when it answers this
// request fresh.
func (x *exchange) filled(ctx context.Context) (*flight, bool) {
	if c := x.lookup(ctx, false); x.answers(c, needFresh) {
		return &flight{c: c}, true
	}
	return nil, false
}
