package proxy

import (
	"context"
	"time"

	"github.com/sidecache/sidecache/internal/lease"
)

// clusterLease makes this flight's miss one upstream call for the whole
// cluster (internal/lease): it takes the key's lease in the shared tier,
// or waits for the holder's fill. It returns a flight when another
// replica's fill answers the request (the fit rule, answers). Otherwise
// the caller fetches, and calls release once its answer is stored, to let
// the waiters go (a no-op unless this replica took the lease).
func (x *exchange) clusterLease(ctx context.Context, stale candidate) (*flight, func()) {
	ttl := x.h.leaseTTL
	if ttl <= 0 {
		ttl = x.st.timeout
	}
	// Wait for an entry newer than the stale copy in hand: the holder's
	// fetch, not the copy that made this a miss.
	var newer time.Time
	if stale.e != nil {
		newer = stale.e.StoredAt
	}
	f, _, release := lease.Take(ctx, x.h.leaser, x.key, ttl, newer, x.filled, x.rs.m.LeaseTakeover)
	return f, release
}

// filled is the flight of another replica's fill when it answers this
// request fresh.
func (x *exchange) filled(ctx context.Context) (*flight, bool) {
	if c := x.lookup(ctx, false); x.answers(c, needFresh) {
		return &flight{c: c}, true
	}
	return nil, false
}
