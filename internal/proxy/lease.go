package proxy

import (
	"context"
	"time"
)

// maxTakeovers bounds how often one flight waits again after a lease
// lapsed, before it fetches on its own. A lapse means the holder died or
// lost Redis; the waiters then race for the lease and one of them fetches
// for the cluster, so each lapse costs one more upstream call, and a flight
// never makes more than one call of its own. Lapse after lapse (Redis
// evicting lease keys under memory pressure, replicas dying one after
// another) would keep a waiter waiting; after maxTakeovers it stops.
const maxTakeovers = 2

// clusterLease makes this flight's miss one upstream call for the whole
// cluster: it takes the key's lease in the shared tier, or waits for the
// holder's fill. It returns a flight when another replica's fill answers
// the request. Otherwise the caller fetches, and calls release once its
// answer is stored, to let the waiters go (a no-op unless this replica
// took the lease).
//
// A holder that vanishes (killed, cut off from Redis, or whose release was
// lost with writes a stalled Redis never ran) stops renewing its lease,
// which lapses within the shared tier's lease hold, well inside the
// upstream timeout: the waiters then take the lease over, and one of them
// fetches, rather than wait out lease_ttl.
func (x *exchange) clusterLease(ctx context.Context, stale candidate) (*flight, func()) {
	noop := func() {}
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
	for takeover := 0; ; takeover++ {
		release, acquired, err := x.h.leaser.Lease(ctx, x.key, ttl)
		if err != nil {
			// The shared tier is unreachable: fetch as a lone replica would.
			return nil, noop
		}
		if acquired {
			return nil, release
		}
		f, lapsed := x.waitFill(ctx, ttl, &newer)
		if f != nil {
			return f, noop
		}
		if lapsed {
			x.rs.m.LeaseTakeover()
		}
		if !lapsed || takeover == maxTakeovers {
			return nil, noop
		}
	}
}

// waitFill waits for the lease holder's fill. An entry that turns up but
// cannot answer (still stale: the copy the tiers would not show this
// request, or another variant's marker) only moves the bar, *newer.
// lapsed reports that the lease ended without its holder's release.
func (x *exchange) waitFill(ctx context.Context, ttl time.Duration, newer *time.Time) (f *flight, lapsed bool) {
	for {
		e, ok, lapsed, _ := x.h.leaser.WaitFill(ctx, x.key, ttl, *newer)
		if !ok {
			return nil, lapsed
		}
		if c := x.lookup(ctx, false); x.answers(c, needFresh) {
			return &flight{c: c}, false
		}
		if e == nil || !e.StoredAt.After(*newer) {
			return nil, false
		}
		*newer = e.StoredAt
	}
}
