package l2

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/redisbudget"
)

// A lease key holds its holder's token (32 hex digits) while the fill runs,
// and releasedMark for a short while after the holder released it: a
// waiter must tell a holder that finished without a fill (its answer was
// not cacheable: fetch on your own, as it did) from one that vanished (it
// died, or its release or its renewals were lost with a Redis that stalled:
// take over). A key that is simply gone is the second case.
//
// passMark is the cluster-wide hit-for-pass (Varnish's hit-for-miss): the
// holder's answer may not be stored (private, no-store, Set-Cookie,
// Vary: *, too large...), so waiting on the key's lease is waiting for a
// fill that never comes. Its waiters stop at once, and for as long as
// the holder asked (bounded by the caller: the route's ttl, at most two
// minutes) a miss takes no lease and fetches on its own (ErrHitForPass).
// The mark only skips the lease, never storage: every fetch under it is
// judged and stored as any, and the first one stored clears it.
const (
	releasedMark = "released"
	passMark     = "pass"
)

// ErrHitForPass is Lease's answer for a key marked hit-for-pass (see
// passMark): no lease, fetch on your own, and call release with the
// outcome, which clears the mark when the answer was stored.
var ErrHitForPass = errors.New("l2: lease: hit-for-pass")

// minLeaseHold is the floor of Options.LeaseHold's default.
const minLeaseHold = 500 * time.Millisecond

// releaseScript marks a lease released (or hit-for-pass: ARGV[2]) only if
// it still holds the caller's token: a holder whose lease lapsed must not
// end the next holder's. The mark lives ARGV[3] ms: long enough for
// polling waiters to see it, or the hit-for-pass the holder asked.
const releaseScript = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0`

// unpassScript drops a hit-for-pass mark (and nothing else: a lease
// taken since it lapsed is another holder's).
const unpassScript = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`

// acquireScript takes a lease that is free or only marked released: the
// mark is for the last holder's waiters, and must not keep the next miss
// (an entry that went stale soon after its fill) from leasing the key.
// It returns 2 for a lease taken over the mark, 1 for a free one, 3 for
// a key marked hit-for-pass (ARGV[4]), which it leaves as it is.
var acquireScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v == ARGV[4] then return 3 end
if v and v ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
if v then return 2 end
return 1`)

// renewScript extends a lease to ARGV[2] ms only while it holds the
// caller's token.
var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)

// WaitFill polls with a backoff between these bounds: the first checks
// catch a fill already under way, later ones keep the load on Redis low.
const (
	waitMin = 2 * time.Millisecond
	waitMax = 20 * time.Millisecond
)

// leaseState is what a waiter's check found under the lease key.
type leaseState uint8

const (
	leaseHeld     leaseState = iota // a holder's token
	leaseReleased                   // releasedMark
	leaseLapsed                     // nothing: expired unrenewed, evicted, or lost with a restart
)

// Lease tries to become the one replica that fills key, so that concurrent
// misses across the cluster make one upstream call.
//
// The lease is short and renewed: it is taken for Options.LeaseHold (at
// most ttl), and while the holder works a goroutine extends it every
// LeaseHold/3, never past ttl after it was taken. So a holder that dies,
// loses its connection to Redis, or whose release is lost with writes a
// stalled Redis never ran, leaves a lease that lapses within LeaseHold,
// not ttl, and a waiter takes over (see WaitFill's lapsed). Renewals stop
// at release, when ctx ends, at ttl, when the store closes, or once the
// key no longer holds this holder's token.
//
// The holder stores the entry with Set and then calls release. release
// never blocks: it is queued behind the holder's earlier Set, so a waiter
// never sees the lease released before the entry is in Redis. It is safe
// to call more than once (the first call counts), and it marks the lease
// released only while it still holds this holder's token. pass > 0 says
// the holder's answer may not be stored: the lease is marked hit-for-pass
// for pass instead (passMark), so its waiters fetch on their own at once
// and the key's misses skip the lease meanwhile. When acquired is false
// release does nothing, but under a hit-for-pass mark (err is
// ErrHitForPass): release(0), an answer that was stored, clears the mark
// (a later answer that may be stored ends it before its time); release
// with pass > 0 leaves it to lapse when its holder said, never later.
//
// released reports a lease taken over its last holder's release mark:
// that holder finished within LeaseHold, most often by storing its fill,
// which a miss that read L2 before it was stored has not seen. The caller
// looks again before it fetches (lease.Take), or the key costs the
// upstream a second call.
//
// An error (Redis down or slow) means no lease either way: the caller
// fetches on its own, as it would without L2.
func (s *Store) Lease(ctx context.Context, key string, ttl time.Duration) (release func(pass time.Duration), acquired, released bool, err error) {
	noop := func(time.Duration) {}
	if err := s.usable(); err != nil {
		return noop, false, false, wrap("lease", err)
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	token := hex.EncodeToString(b)
	ttl = max(ttl, time.Millisecond)
	deadline := time.Now().Add(ttl)
	hold := min(s.opts.LeaseHold, ttl)

	cctx, cancel, sp, err := s.withBudget(ctx)
	if err != nil {
		cancel()
		return noop, false, false, wrap("lease", err) // no lease: the caller fetches on its own
	}
	n, err := acquireScript.Run(cctx, s.rdb, []string{s.leaseKey(key)}, token, releasedMark, max(hold, time.Millisecond).Milliseconds(), passMark).Int()
	cancel()
	s.end(ctx, sp, err)
	if err != nil {
		return noop, false, false, wrap("lease", err)
	}
	switch n {
	case 0:
		return noop, false, false, nil
	case 3:
		var once sync.Once
		return func(pass time.Duration) {
			if pass <= 0 {
				once.Do(func() { _ = s.enqueue(op{kind: opUnpass, key: key}) })
			}
		}, false, false, ErrHitForPass
	}
	stop := make(chan struct{})
	if hold < ttl {
		go s.renew(ctx, key, token, hold, deadline, stop)
	}
	var once sync.Once
	return func(pass time.Duration) {
		once.Do(func() {
			close(stop)
			s.release(key, token, pass)
		})
	}, true, n == 2, nil
}

// renew keeps a lease alive while its holder works (see Lease).
func (s *Store) renew(ctx context.Context, key, token string, hold time.Duration, deadline time.Time, stop <-chan struct{}) {
	t := time.NewTicker(max(hold/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-s.stop:
			return
		case <-t.C:
		}
		px := min(hold, time.Until(deadline))
		if px < time.Millisecond {
			return
		}
		if s.admit() != nil {
			continue // the lease lapses unless Redis is back in time
		}
		cctx, cancel := s.withTimeout(ctx)
		n, err := renewScript.Run(cctx, s.rdb, []string{s.leaseKey(key)}, token, px.Milliseconds()).Int()
		cancel()
		s.done(ctx, err)
		if err == nil && n == 0 {
			return // lapsed, evicted or taken over: not ours to extend
		}
	}
}

func (s *Store) release(key, token string, pass time.Duration) {
	if s.enqueue(op{kind: opRelease, key: key, val: []byte(token), ttl: pass}) == nil {
		return
	}
	// The queue is full or closed: release now rather than make the other
	// replicas wait for the lease to lapse. Whatever the holder queued
	// before is lost or about to be written, so waiters may fetch on their
	// own.
	if s.admit() != nil {
		return
	}
	ctx, cancel := s.withTimeout(context.Background())
	defer cancel()
	err := s.rdb.Eval(ctx, releaseScript, []string{s.leaseKey(key)}, s.releaseArgs(token, pass)...).Err()
	s.done(context.Background(), err)
}

// releaseArgs are releaseScript's: the release mark for LeaseHold, or,
// with pass > 0, the hit-for-pass mark for pass.
func (s *Store) releaseArgs(token string, pass time.Duration) []any {
	if pass > 0 {
		return []any{token, passMark, max(pass, time.Millisecond).Milliseconds()}
	}
	return []any{token, releasedMark, s.opts.LeaseHold.Milliseconds()}
}

// WaitFill is for a replica that did not get the lease: it waits until an
// entry stored after newer appears under key in L2 (returning it; the zero
// newer accepts any entry), the lease ends without a fill, or maxWait
// passes, and then reports a miss so the caller fetches on its own.
//
// lapsed reports that the lease ended without its holder's release: the
// holder died, was cut off from Redis, or its release was lost. Its fetch
// may never land, so the caller should take the lease over (Lease again)
// rather than fetch on its own: one replica then fetches for the cluster
// again. A lease released without a fill (the answer was not cacheable)
// is a plain miss: every waiter fetches, as the holder did.
//
// It polls, with a backoff from 2 ms to 20 ms, rather than listening for a
// "filled" notice on pub/sub: a poll cannot miss a notice sent before it
// subscribed, needs no per-key subscription bookkeeping, and costs two
// cheap commands per check on a path that is already a miss.
//
// newer matters once a stale copy exists: the waiter holds it, and
// returning on it would send every replica to the upstream.
func (s *Store) WaitFill(ctx context.Context, key string, maxWait time.Duration, newer time.Time) (e *cache.Entry, found, lapsed bool, err error) {
	// A request whose Redis budget is spent does not wait: Redis was too
	// slow for it already, and it fetches on its own. Otherwise the polls
	// are not charged to the budget (internal/redisbudget): the wait is
	// for another replica's upstream fetch, bounded by maxWait, and a
	// budget spent by a few hundred quick polls would send the waiter to
	// the upstream itself, the call the lease exists to save. Each poll
	// has the plain timeout.
	if b := redisbudget.From(ctx); b != nil && b.Left(s.opts.Timeout) <= 0 {
		return nil, false, false, wrap("wait fill", ErrBudget)
	}
	ctx = redisbudget.Without(ctx)
	deadline := time.Now().Add(maxWait)
	wait := waitMin
	for {
		e, found, state, err := s.check(ctx, key, newer)
		if err != nil || found {
			return e, found, false, wrap("wait fill", err)
		}
		if state != leaseHeld {
			// The lease has ended. In a cluster the entry and the lease
			// live on different nodes, so the GET above may have run
			// before the holder's SET landed: look once more.
			e, found, _, err := s.check(ctx, key, newer)
			return e, found, state == leaseLapsed && !found && err == nil, wrap("wait fill", err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, false, false, nil
		}
		t := time.NewTimer(min(wait, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, false, false, wrap("wait fill", ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, waitMax)
	}
}

// check reads the lease and the entry in one round trip (two in Cluster,
// for the epochs), the lease first so that on one server a released lease
// implies the fill is visible. An entry invalidated since its request left
// is not found: a waiter must not take the version a write replaced.
func (s *Store) check(ctx context.Context, key string, newer time.Time) (e *cache.Entry, found bool, state leaseState, err error) {
	if err := s.usable(); err != nil {
		return nil, false, leaseHeld, err
	}
	cctx, cancel, sp, err := s.withBudget(ctx)
	defer cancel()
	if err != nil {
		return nil, false, leaseHeld, err // the waiter fetches on its own
	}
	pipe := s.rdb.Pipeline()
	lease := pipe.Get(cctx, s.leaseKey(key))
	var get redis.Cmder
	if s.isCluster() {
		get = pipe.Get(cctx, s.entryKey(key))
	} else {
		get = pipe.Eval(cctx, readScript, []string{s.entryKey(key)}, s.key("v:", ""))
	}
	_, _ = pipe.Exec(cctx)
	if err = lease.Err(); errors.Is(err, redis.Nil) {
		err = nil
	}
	if gerr := get.Err(); err == nil && !errors.Is(gerr, redis.Nil) {
		err = gerr
	}
	var b []byte
	if err == nil {
		switch g := get.(type) {
		case *redis.StringCmd:
			b, _ = g.Bytes()
			var vals [][]byte
			if vals, err = s.epochsOf(cctx, [][]byte{b}); err == nil {
				b = vals[0]
			}
		case *redis.Cmd:
			if v, gerr := g.Text(); gerr == nil {
				b = []byte(v)
			}
		}
	}
	s.end(ctx, sp, err)
	if err != nil {
		return nil, false, leaseHeld, err
	}
	switch lease.Val() {
	case "":
		state = leaseLapsed
	case releasedMark, passMark:
		// A hit-for-pass mark is a release without a fill: the waiter
		// fetches its own at once.
		state = leaseReleased
	}
	if b != nil {
		e, found, _ = s.decode(key, b)
	}
	if found && !e.StoredAt.After(newer) {
		e, found = nil, false // the copy the waiter already holds
	}
	return e, found, state, nil
}
