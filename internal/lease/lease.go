// Package lease makes a miss one upstream call for the whole cluster: the
// replica that takes a key's lease in the shared tier fetches, and the
// others wait for its fill rather than fetch too.
//
// A holder that vanishes (killed, cut off from Redis, or whose release was
// lost with writes a stalled Redis never ran) stops renewing its lease,
// which lapses within the shared tier's lease hold, well inside the
// upstream timeout: the waiters then take the lease over, and one of them
// fetches, rather than wait out the lease's whole ttl. The waiters of a
// Sweep take over together the leases that lapsed at once (sweep.go).
package lease

import (
	"context"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
)

// MaxTakeovers bounds how often one miss waits again after a lease
// lapsed, before it fetches on its own. A lapse means the holder died or
// lost Redis; the waiters then race for the lease and one of them fetches
// for the cluster, so each lapse costs one more upstream call, and a miss
// never makes more than one call of its own. Lapse after lapse (Redis
// evicting lease keys under memory pressure, replicas dying one after
// another) would keep a waiter waiting; after MaxTakeovers it stops.
const MaxTakeovers = 2

// Leaser is the shared tier's lease (cache/l2.Store is one).
type Leaser interface {
	// Lease takes key's lease. release(pass) lets the waiters go once
	// the answer is stored; pass > 0: it may not be, and the key is
	// marked hit-for-pass for pass, so that its misses skip the lease
	// meanwhile (an error then, with a release of its own: l2.Lease).
	Lease(ctx context.Context, key string, ttl time.Duration) (release func(pass time.Duration), acquired, released bool, err error)
	// WaitFill waits for an entry stored after newer (the zero time: any
	// entry). lapsed: the lease ended without its holder's release.
	WaitFill(ctx context.Context, key string, max time.Duration, newer time.Time) (e *cache.Entry, found, lapsed bool, err error)
}

// Take takes key's lease for ttl, or waits for the holder's fill. newer
// is the time the entry in hand (a stale copy, the one that made this a
// miss) was stored, so that only a newer one is waited for; zero: none.
//
// When a fill turns up, answer looks for an entry that answers the
// caller's request (the caller's own lookup and fit rule): Take returns
// what it found with ok. Otherwise the caller fetches, and calls release
// once its answer is stored, to let the waiters go (a no-op unless this
// caller took the lease), with pass > 0 when the answer may not be
// stored: the key is then marked hit-for-pass for pass, its waiters
// fetch their own at once, and later misses skip the lease (Varnish's
// hit-for-miss: a fill that is never stored is not waited for). The
// caller bounds pass; a stored answer clears the mark. takeover is
// called each time a lease lapsed under a waiter (a metric), or was
// taken over for it (TakeIn); nil: none.
//
// An unreachable shared tier is no lease: the caller fetches as a lone
// replica would. So is a key marked hit-for-pass, whose release the
// caller gets: an answer it stores clears the mark.
func Take[T any](ctx context.Context, l Leaser, key string, ttl time.Duration, newer time.Time,
	answer func(ctx context.Context) (T, bool), takeover func()) (v T, ok bool, release func(pass time.Duration)) {
	v, ok, release, _ = TakeIn[T, struct{}, struct{}](ctx, l, nil, key, ttl, newer, answer, takeover, nil)
	return v, ok, release
}

// TakeIn is Take for a waiter of s (nil: Take): while it waits, it is one
// of s's waiters, made with arg() (called once, on the caller's goroutine,
// when it first waits), and a lease that lapses under it is taken over
// in a round of s (see Sweep) rather than alone. When that round took its
// lease over, TakeIn returns the claim, with no answer and a no-op
// release: the load of s answers the caller (Claim.Wait), and lets the
// lease go once the key is stored.
func TakeIn[T, A, R any](ctx context.Context, l Leaser, s *Sweep[A, R], key string, ttl time.Duration, newer time.Time,
	answer func(ctx context.Context) (T, bool), takeover func(), arg func() A) (v T, ok bool, release func(pass time.Duration), c *Claim[A, R]) {
	noop := func(time.Duration) {}
	var w *Claim[A, R] // the caller as a waiter of s, once it waits
	defer func() {
		// A round may take w's lease over at any time until w leaves:
		// then the claim is the caller's answer, unless it found one.
		// Its wait ended as the lease lapsed, seen by another waiter.
		if w != nil && c == nil && s.leave(w) && !ok {
			var zero T
			v, release, c = zero, noop, w
			if takeover != nil {
				takeover()
			}
		}
	}()
	for n := 0; ; n++ {
		release, acquired, released, err := l.Lease(ctx, key, ttl)
		if err != nil {
			return v, false, release, nil
		}
		if acquired && released {
			// Taken over the last holder's release mark: its fill may
			// have landed since this miss read the tier. Look once more,
			// or the key costs the upstream a second call.
			if v, ok := answer(ctx); ok {
				release(0)
				return v, true, noop, nil
			}
		}
		if acquired {
			return v, false, release, nil
		}
		wctx := ctx
		if s != nil {
			if w == nil {
				w = s.enter(ctx, key, ttl, arg())
			}
			wctx = w.ctx // ends once a round takes the lease over
		}
		v, ok, lapsed := waitFill(wctx, l, key, ttl, &newer, answer)
		if ok {
			return v, true, noop, nil
		}
		if lapsed && takeover != nil {
			takeover()
		}
		if lapsed && w != nil && s.lapsed(ctx, l, w) {
			return v, false, noop, w
		}
		if !lapsed || n == MaxTakeovers {
			return v, false, noop, nil
		}
	}
}

// waitFill waits for the lease holder's fill. An entry that turns up but
// does not answer (still stale: the copy the tiers would not show this
// request, or another variant's marker) only moves the bar, *newer.
// lapsed reports that the lease ended without its holder's release.
func waitFill[T any](ctx context.Context, l Leaser, key string, ttl time.Duration, newer *time.Time,
	answer func(ctx context.Context) (T, bool)) (v T, ok, lapsed bool) {
	for {
		e, found, lapsed, _ := l.WaitFill(ctx, key, ttl, *newer)
		if !found {
			return v, false, lapsed
		}
		if v, ok := answer(ctx); ok {
			return v, true, false
		}
		if e == nil || !e.StoredAt.After(*newer) {
			return v, false, false
		}
		*newer = e.StoredAt
	}
}
