package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// A holder that dies leaves the leases of everything it was fetching to
// lapse together, and every replica waiting on them sees each one lapse on
// its own poll (2-20 ms apart: l2's WaitFill backoff). Taken over one by
// one, they reach the caller one by one: a batch route's ids then left in
// a bulk call each, or a few, where the holder would have made one. A
// Sweep gathers them: the first of its waiters that sees a lease lapse
// takes over at once, in one round, every lease its waiters wait on that
// is free by then (for the others, the waiters wait on as before), and the
// keys it took go to the caller's load together.
//
// So when a holder's leases lapse at one instant (they expire together, a
// Redis failover loses them, an eviction drops them at once), each
// replica takes its share of them over in one round and loads them in one
// go. Leases that lapse at different instants are gathered by the rounds
// that find them lapsed: as many rounds as the instants a waiter sees.

// ErrLoadPanicked is the error of a Claim whose Sweep's load panicked
// before it finished the claim.
var ErrLoadPanicked = errors.New("lease: takeover load panicked")

// sweepLeases bounds the Lease calls of one round at once: a round asks
// for every lease its waiters wait on, and Redis, or the client's pool,
// must not see thousands at once.
const sweepLeases = 32

// maxSweep bounds the leases one round asks for: a lapse costs Redis one
// Lease call per waiter swept, where a lone takeover cost one, and a
// replica may hold many waiters. Waiters past it are left to the next
// round their own lapse starts.
const maxSweep = 1024

// Sweep gathers the lease takeovers of its waiters (TakeIn): A is what
// the load needs of a waiter (its request), R what a waiter gets back.
type Sweep[A, R any] struct {
	load func(ctx context.Context, claims []*Claim[A, R])

	mu      sync.Mutex
	waiting map[*Claim[A, R]]struct{} // not yet taken over
	round   *round[A, R]              // taking leases; nil: none
}

// round is one sweep of a Sweep's waiters: the leases of in are asked for
// at once; over closes once each is decided.
type round[A, R any] struct {
	in   map[*Claim[A, R]]struct{}
	over chan struct{}
}

// NewSweep is a Sweep whose rounds hand the leases they took to load, on
// a goroutine of their own, ctx uncancelled (each claim's lease is
// renewed until it is released, within the lease's ttl). load must
// finish every claim (Claim.Done or Fail), once the claim's key is
// stored; a claim it has not finished when it panics fails with
// ErrLoadPanicked.
func NewSweep[A, R any](load func(ctx context.Context, claims []*Claim[A, R])) *Sweep[A, R] {
	return &Sweep[A, R]{load: load, waiting: make(map[*Claim[A, R]]struct{})}
}

// Claim is a waiter of a Sweep, and, once a round took the lease of its
// key over for it, that lease and the waiter's answer to come.
type Claim[A, R any] struct {
	// Arg is the waiter's, for the load (TakeIn's arg).
	Arg A
	key string
	ttl time.Duration
	// ctx is the waiter's wait, ended once a round took its lease over.
	ctx    context.Context
	cancel context.CancelFunc

	claimed bool // Sweep.mu
	release func(pass time.Duration)
	once    sync.Once
	done    chan struct{}
	r       R
	err     error
}

// Done finishes c: its lease is released with pass (0: the answer is
// stored; see Take's release) and its waiter gets r. Only the first Done
// or Fail counts.
func (c *Claim[A, R]) Done(r R, pass time.Duration) {
	c.once.Do(func() {
		c.release(pass)
		c.r = r
		close(c.done)
	})
}

// Fail finishes c with err: its lease is released without a fill, so the
// other replicas' waiters fetch their own, and its waiter gets err.
func (c *Claim[A, R]) Fail(err error) {
	c.once.Do(func() {
		c.release(0)
		c.err = err
		close(c.done)
	})
}

// Wait is the claim's answer, once its load finished it, or ctx.Err().
func (c *Claim[A, R]) Wait(ctx context.Context) (R, error) {
	select {
	case <-c.done:
		return c.r, c.err
	case <-ctx.Done():
		var zero R
		return zero, ctx.Err()
	}
}

// enter makes a waiter of s for key, whose wait runs under the claim's
// ctx.
func (s *Sweep[A, R]) enter(ctx context.Context, key string, ttl time.Duration, arg A) *Claim[A, R] {
	c := &Claim[A, R]{Arg: arg, key: key, ttl: ttl, done: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(ctx)
	s.mu.Lock()
	s.waiting[c] = struct{}{}
	s.mu.Unlock()
	return c
}

// leave takes the waiter c out of s, and reports whether a round took
// its lease over: the claim is then the load's, to finish.
func (s *Sweep[A, R]) leave(c *Claim[A, R]) (claimed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !c.claimed {
		delete(s.waiting, c)
		c.cancel()
	}
	return c.claimed
}

// lapsed is told by the waiter c that its lease lapsed: it runs a round
// that covers c (or waits for the one in progress, when it does), and
// reports whether the round took c's lease over. When not, the lease is
// another's by then (another replica took it over), or the round could
// not ask for it (Redis down or slow: l2's breaker makes the rest of a
// round, and the waiter's own ask after it, fail fast), or ctx ended.
func (s *Sweep[A, R]) lapsed(ctx context.Context, l Leaser, c *Claim[A, R]) bool {
	for {
		s.mu.Lock()
		if c.claimed {
			s.mu.Unlock()
			return true
		}
		r := s.round
		if r == nil {
			// The waiters not yet taken over, c first: the leases of
			// one lapse are free by now.
			r = &round[A, R]{in: make(map[*Claim[A, R]]struct{}, min(len(s.waiting), maxSweep)), over: make(chan struct{})}
			r.in[c] = struct{}{}
			for w := range s.waiting {
				if len(r.in) == maxSweep {
					break
				}
				r.in[w] = struct{}{}
			}
			s.round = r
			s.mu.Unlock()
			s.sweep(ctx, l, r)
			return s.claimed(c)
		}
		_, in := r.in[c]
		s.mu.Unlock()
		select {
		case <-r.over:
		case <-ctx.Done():
			return false
		}
		if in {
			return s.claimed(c)
		}
		// A round that began before c waited, or past maxSweep: the
		// next covers it.
	}
}

// claimed reports whether a round took c's lease over.
func (s *Sweep[A, R]) claimed(c *Claim[A, R]) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return c.claimed
}

// taken is one lease a round asked for.
type taken struct {
	release            func(pass time.Duration)
	acquired, released bool
	err                error
}

// sweep runs the round r: it asks for the lease of each of its waiters'
// keys, and hands those it took to the load. A lease held (the holder
// lives, or another replica took it over) is not taken, and its waiter
// waits on. One taken over its last holder's release mark is let go at
// once: that holder finished, its fill is there for its waiter to find,
// or the mark tells the waiter to fetch its own, as it would have. So is
// one whose waiter left while the round asked.
func (s *Sweep[A, R]) sweep(ctx context.Context, l Leaser, r *round[A, R]) {
	ctx = context.WithoutCancel(ctx) // the leases outlive the waiter that swept
	claims := make([]*Claim[A, R], 0, len(r.in))
	for c := range r.in {
		claims = append(claims, c)
	}
	got := make([]taken, len(claims))
	var wg sync.WaitGroup
	sem := make(chan struct{}, sweepLeases)
	for i, c := range claims {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			t := &got[i]
			t.release, t.acquired, t.released, t.err = l.Lease(ctx, c.key, c.ttl)
		}()
	}
	wg.Wait()
	var won []*Claim[A, R]
	var let []func(time.Duration)
	s.mu.Lock()
	for i, c := range claims {
		t := got[i]
		if t.err != nil || !t.acquired {
			continue
		}
		if _, waits := s.waiting[c]; t.released || !waits {
			// Over a release mark, or for a waiter that left
			// meanwhile (it found its fill, or fetches on its own):
			// nobody here waits for this lease's fill.
			let = append(let, t.release)
			continue
		}
		c.claimed, c.release = true, t.release
		delete(s.waiting, c)
		c.cancel()
		won = append(won, c)
	}
	s.round = nil
	close(r.over)
	s.mu.Unlock()
	for _, release := range let {
		release(0)
	}
	if len(won) > 0 {
		go s.loadAll(ctx, won)
	}
}

// loadAll is the load of one round's claims, guarded: a claim is never
// left without an answer, which its waiter would wait for forever.
func (s *Sweep[A, R]) loadAll(ctx context.Context, claims []*Claim[A, R]) {
	defer func() {
		if v := recover(); v != nil {
			err := fmt.Errorf("%w: %v", ErrLoadPanicked, v)
			for _, c := range claims {
				c.Fail(err)
			}
		}
	}()
	s.load(ctx, claims)
}
