package proxy

import (
	"context"
	"time"

	"github.com/sidecache/sidecache/internal/bulkanswer"
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
	// queue's deadline and its bulk call's timeout bound. A lease that
	// lapses under the wait is taken over with the others of the
	// route's waiters here that lapsed with it, and their ids join the
	// batcher together (takeover.go): the claim's answer is then the id's.
	f, release, c := x.clusterLeaseIn(ctx, stale, x.rs.takeovers)
	switch {
	case c != nil:
		return x.takenOver(ctx, c)
	case f != nil:
		return f, nil
	}
	return x.fetchReleasing(ctx, release, x.loadBatched)
}

// fetchReleasing is fetch (the upstream's or the batch's) under the
// cluster lease: release lets the lease's waiters go once the answer is
// stored, and marks the key hit-for-pass when the answer may not be
// (leasePass). Deferred, so that a fetch that panics still lets them go.
func (x *exchange) fetchReleasing(ctx context.Context, release func(pass time.Duration), fetch func(context.Context) (*flight, error)) (f *flight, err error) {
	defer func() { release(x.leasePass(f, err)) }()
	return fetch(ctx)
}

// leasePass is how long the cluster lease of a key whose fetch gave f
// and err is marked hit-for-pass (Varnish's hit-for-miss): 0, none,
// unless the answer may not be stored for what it is (flight.unstorable:
// private, no-store, Set-Cookie, Vary: *, an uncacheable status; or over
// max_body_bytes). Waiting on the lease is then waiting for a fill that
// never comes: the holder's waiters on other replicas would each wait for
// its fetch and then fetch their own, and every later miss would do the
// same, one replica after another. With the mark, they stop waiting at
// once and the key's misses skip the lease and fetch their own, each
// its own answer (a private one is never shared: the mark only skips the
// lease). Not for a failure (an error, a 5xx: the upstream's state, which
// the lease shields it from), nor for an answer refused only because a
// write invalidated it on its way. Bounded as the local hit-for-pass is
// (passFor), and cleared by the first answer stored under it.
func (x *exchange) leasePass(f *flight, err error) time.Duration {
	switch {
	case bulkanswer.Passes(err):
	case err != nil || f == nil:
		return 0
	case f.large != nil:
	case !f.unstorable || f.stored || f.c.e == nil || f.c.e.Status >= 500:
		return 0
	}
	return x.passFor()
}

// passFor is how long a key or variant whose answer may not be stored
// passes (hit-for-pass: local for a body over max_body_bytes, cluster-wide
// for the lease): the route's ttl, at most two minutes, so that an answer
// that becomes storable is not kept from the cache's coalescing for long.
func (x *exchange) passFor() time.Duration {
	return min(x.rs.rt.TTL, 2*time.Minute)
}

// clusterLease makes this flight's miss one upstream call for the whole
// cluster (internal/lease): it takes the key's lease in the shared tier,
// or waits for the holder's fill. It returns a flight when another
// replica's fill answers the request (the fit rule, answers). Otherwise
// the caller fetches, and calls release once its answer is stored, to let
// the waiters go (a no-op unless this replica took the lease, or the key
// is marked hit-for-pass), with leasePass's verdict (fetchReleasing).
func (x *exchange) clusterLease(ctx context.Context, stale candidate) (*flight, func(pass time.Duration)) {
	f, release, _ := x.clusterLeaseIn(ctx, stale, nil)
	return f, release
}

// clusterLeaseIn is clusterLease for a waiter of the route's takeovers
// (nil: none): it returns the claim when a round of theirs took the
// lease over, for the caller to wait for its answer (takenOver).
func (x *exchange) clusterLeaseIn(ctx context.Context, stale candidate, s *takeovers) (*flight, func(pass time.Duration), *takeoverClaim) {
	ttl := x.leaseTTL()
	// Wait for an entry newer than the stale copy in hand: the holder's
	// fetch, not the copy that made this a miss.
	var newer time.Time
	if stale.e != nil {
		newer = stale.e.StoredAt
	}
	f, _, release, c := lease.TakeIn(ctx, x.h.leaser, s, x.key, ttl, newer, x.filled, x.rs.m.LeaseTakeover, x.detach)
	return f, release, c
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
	ttl := x.h.LeaseTTL()
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
