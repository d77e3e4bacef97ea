// Package coalesce collapses concurrent calls for one key into one call, like
// groupcache's singleflight, except that a waiter can stop waiting.
//
// A proxy needs that difference: when the client that caused an upstream
// fetch goes away, the fetch must go on for every other client waiting on
// the same key, and a client that goes away must not be held until the
// upstream answers.
package coalesce

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// ErrPanicked is wrapped by the error every caller of a flight gets when fn
// panicked. The error's text carries the panic value and fn's stack.
var ErrPanicked = errors.New("coalesce: fn panicked")

// errGoexit is every caller's error when fn called runtime.Goexit.
var errGoexit = errors.New("coalesce: fn called runtime.Goexit")

// Group is a namespace of keys. The zero value is ready to use; a Group must
// not be copied after first use.
//
// It is singleflight's DoChan without what a waiter that can leave does
// not need: the result is handed over in the flight itself, not boxed into
// an interface and sent on a channel per caller, so a flight costs the
// Flight, its channel only when a caller waits for it (a flight its first
// step answers has none), and a goroutine only when its rest runs on one
// (see Next).
type Group[V any] struct {
	mu    sync.Mutex
	calls map[string]*Flight[V]
	// finished counts the flights finished so far (Finished).
	finished atomic.Uint64
}

// Finished is how many of g's flights have finished so far. A caller that
// read what its flight would fill (a cache), found nothing there, and then
// leads a flight may skip reading it again when Finished has not moved
// since before that read: no flight of g (of its key or any other) has
// finished meanwhile, so none has filled it. A flight's Finish counts
// before its key leaves g, so a caller that leads a new flight for the
// key of one that finished after its read sees the count moved.
func (g *Group[V]) Finished() uint64 { return g.finished.Load() }

// Flight is one flight of a key: v and err are written once, before done
// is closed. What a DoThen's first step handed it to finishes it with
// Finish.
//
// done is made only when a caller is to wait (waitChan), under g.mu, as
// Finish reads it: a flight that its DoThen's first step answers, an L2
// hit, has no waiter and needs no channel of its own. Finish sets a
// flight that has none to closed, the one channel shared by every
// finished flight that nobody waited for.
type Flight[V any] struct {
	g    *Group[V]
	key  string
	done chan struct{} // under g.mu; nil until a caller waits or Finish
	ran  atomic.Bool   // fn has started
	over atomic.Bool   // Finish has been called
	v    V
	err  error
	// ctx is the context fn and a DoThen's steps run with: the
	// leader's, detached from its cancellation (see detached).
	ctx detached
}

// detached is context.WithoutCancel(parent) held in its flight: a
// leader's flight needs one, and WithoutCancel's was an allocation of its
// own per flight, one per batched miss (issue 23). It is that context in
// every respect: no deadline, no Done channel (so a context derived from
// it is never cancelled by it), no error, no cause, parent's values.
//
// It may carry values of its own too (Carry), answered before parent's:
// context.WithValue held in the flight.
type detached struct {
	parent context.Context
	// carried answers Value for the keys it knows (non-nil), before
	// parent; nil: nothing carried.
	carried interface{ Value(key any) any }
}

func (*detached) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*detached) Done() <-chan struct{}       { return nil }
func (*detached) Err() error                  { return nil }

// Value is WithoutCancel's: parent's values, except that context.Cause,
// which asks for the cancelCtx a context hangs from, finds none here, as
// there. For any other key, WithoutCancel's Value is parent's, and asking
// parent directly allocates nothing: WithoutCancel's own Value boxes its
// context into an interface that escapes (context's value walk), one
// allocation per lookup, and a flight's steps look up a few (the
// request's Redis budget, on every L2 read: issue 23). context's key for
// the cancelCtx is an *int (cancelCtxKey), so every *int key, and only
// those, takes WithoutCancel's own path: exact whatever the key.
func (d *detached) Value(key any) any {
	if d.carried != nil {
		if v := d.carried.Value(key); v != nil {
			return v
		}
	}
	if _, ok := key.(*int); ok {
		return context.WithoutCancel(d.parent).Value(key)
	}
	return d.parent.Value(key)
}

func (d *detached) String() string { return fmt.Sprint(d.parent) + ".WithoutCancel" }

// detach is c's context for the leader's ctx (see detached).
func (c *Flight[V]) detach(ctx context.Context) context.Context {
	c.ctx.parent = ctx
	return &c.ctx
}

// Carry has the context c's steps run with answer Value(key) with
// v.Value(key) whenever that is not nil, before the leader's values: a
// value the leader allocates with its flight (DoThenIn's in) reaches the
// steps without a context.WithValue of its own (the proxy's Redis budget
// per request: redisbudget.Budget.Value). Call it from in, before the
// flight's first step runs; a Flight carries one v.
func (c *Flight[V]) Carry(v interface{ Value(key any) any }) { c.ctx.carried = v }

// closed is done of a flight that finished before anyone waited: closed
// once, never written.
var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// waitChan is the channel that Finish closes, made on first need.
func (c *Flight[V]) waitChan() chan struct{} {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
	}
	return c.done
}

// Do runs fn once per key among concurrent callers and gives each the same
// answer.
//
// fn receives context.WithoutCancel(ctx) of the caller that started the
// flight: it keeps that caller's values but is not cancelled when that caller
// goes away, so the others still get the answer. fn must therefore bound
// itself (the proxy uses its upstream timeout).
//
// A caller whose ctx ends stops waiting and gets ctx.Err(); the flight goes
// on. leader reports whether this caller's own fn ran (false: collapsed onto
// another caller's flight). When ctx ended first, leader only says whether
// fn had already started by then.
//
// A panic in fn does not crash the process or hang the waiters: every caller
// gets an error wrapping ErrPanicked (and the panic value, when it is an
// error). A runtime.Goexit in fn (t.FailNow in a test) gives every caller
// an error too.
func (g *Group[V]) Do(ctx context.Context, key string, fn func(ctx context.Context) (V, error)) (v V, leader bool, err error) {
	if err := ctx.Err(); err != nil {
		return v, false, err
	}
	c, leader := g.join(key)
	if leader {
		go c.run(c.detach(ctx), fn)
	}
	return c.wait(ctx, leader)
}

// wait is a caller's wait for c: its answer, or ctx.Err() when ctx ends
// first. An answer already there is taken without a select (a first step that
// finished the flight before returning, a waiter that joined late), even
// when ctx has ended too; a ctx that never ends (no Done channel) costs
// no select either.
func (c *Flight[V]) wait(ctx context.Context, leader bool) (v V, _ bool, err error) {
	fin := c.waitChan()
	select {
	case <-fin:
		return c.v, leader, c.err
	default:
	}
	done := ctx.Done()
	if done == nil {
		<-fin
		return c.v, leader, c.err
	}
	select {
	case <-fin:
		return c.v, leader, c.err
	case <-done:
		return v, leader && c.ran.Load(), ctx.Err()
	}
}

// join returns key's flight in progress, or a new one that the caller
// (leader) must run.
func (g *Group[V]) join(key string) (c *Flight[V], leader bool) { return g.joinIn(key, nil) }

// joinIn is join with the new flight made by in (DoThenIn).
func (g *Group[V]) joinIn(key string, in func() *Flight[V]) (c *Flight[V], leader bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c = g.calls[key]; c != nil {
		return c, false
	}
	if g.calls == nil {
		g.calls = make(map[string]*Flight[V])
	}
	if in != nil {
		c = in()
	} else {
		c = new(Flight[V])
	}
	c.g, c.key = g, key // done is made when a caller first waits (waitChan)
	g.calls[key] = c
	return c, true
}

func (c *Flight[V]) run(ctx context.Context, fn func(context.Context) (V, error)) {
	c.step(func() (V, bool, error) {
		v, err := fn(ctx)
		return v, false, err
	})
}

// Then is the part of a flight that may outlast its leader's wait: DoThen
// runs it on its own goroutine.
type Then[V any] func(ctx context.Context) (V, error)

// First is DoThen's first step. It gets the flight it runs, so that it
// can hand the flight to whatever finishes it (Next.Handed).
type First[V any] func(ctx context.Context, f *Flight[V]) (V, Next[V], error)

// Next is how a flight goes on after a first step that did not answer it
// (DoThen): Then on a goroutine of its own, or, when Handed, nothing here:
// first handed its flight to work that calls f.Finish, once, whenever it
// is done (the batch loader, which fetches a batch of such flights on one
// goroutine of its own). That work must see that Finish is called
// whatever happens (an error is an answer): the flight's waiters wait for
// it. The zero Next: first's answer is the flight's.
type Next[V any] struct {
	Then   Then[V]
	Handed bool
}

// DoThen is Do for a flight whose first step is short and usually
// answers: first runs on the goroutine of the caller that starts the
// flight, and only when it returns a non-zero Next does the flight go on,
// with Next's Then on its own goroutine, or with whatever first handed
// the flight to. Callers that join meanwhile wait as in Do.
//
// This is for the proxy's fill, whose first step is a cache read: on a hit
// that is the whole flight, and running it on a fresh goroutine cost the
// goroutine, its stack growing to the Redis client's depth on every read
// (runtime.newstack, 12 % of the process's CPU on an L2 hit), and the
// wake-up of the parked caller it hands the answer to. The leader cannot
// stop waiting while first runs, so first must be bounded by something
// short (the L2 timeout); Then, like Do's fn, may take as long as the
// upstream does, and the leader stops waiting for it when its ctx ends. A
// batched miss's first hands its flight to a batch: the batch's own
// goroutine finishes the flight, so the miss costs no goroutine of its
// own and its waiters one wake-up, not two, while the leader can still
// stop waiting at once. And as first hands the flight on itself, it does
// so while the caller's own state is still at hand: what the batch keeps
// of it is copied only when needed (the proxy copies its exchange once
// per batch, not per id). A panic or runtime.Goexit in first or Then is
// every caller's error, as in Do, even when first had handed the flight
// on (the first Finish counts).
func (g *Group[V]) DoThen(ctx context.Context, key string, first First[V]) (v V, leader bool, err error) {
	return g.DoThenIn(ctx, key, nil, first)
}

// DoThenIn is DoThen whose flight, when the caller leads one, is the zero
// Flight in returns (nil in: a Flight of its own): a leader that
// allocates for its flight anyway (the proxy's batched miss, its lead)
// holds the Flight in that allocation, one fewer per flight. in is called
// under g's lock, only when the caller leads, before first runs; it must
// be short, must not call g, and must return a Flight never used before.
func (g *Group[V]) DoThenIn(ctx context.Context, key string, in func() *Flight[V], first First[V]) (v V, leader bool, err error) {
	if err := ctx.Err(); err != nil {
		return v, false, err
	}
	c, leader := g.joinIn(key, in)
	if leader {
		flightCtx := c.detach(ctx)
		var then Then[V]
		if !c.step(func() (V, bool, error) {
			v, n, err := first(flightCtx, c)
			switch {
			case n.Then != nil:
				then = n.Then
			case n.Handed:
			default:
				return v, false, err
			}
			return v, true, err
		}) {
			return c.v, true, c.err
		}
		if then != nil {
			go c.run(flightCtx, then)
		}
	}
	return c.wait(ctx, leader)
}

// step runs one step of c's flight. Unless the step reports that the flight
// goes on (more), it finishes c with the step's result, as it does when the
// step panics or calls runtime.Goexit.
func (c *Flight[V]) step(fn func() (v V, more bool, err error)) (more bool) {
	returned := false
	defer func() {
		if returned {
			return
		}
		var err error
		if r := recover(); r != nil {
			err = panicError(r)
		} else {
			err = errGoexit
		}
		var zero V
		c.Finish(zero, err)
	}()
	c.ran.Store(true)
	v, more, err := fn()
	returned = true
	if !more {
		c.Finish(v, err)
	}
	return more
}

// FinishWith finishes c with what fn returns: for the work a first step
// handed on (Next.Handed), run where a panic would otherwise take the process down or leave
// the flight's callers waiting. A panic or runtime.Goexit in fn is every
// caller's error, as in Do.
func (c *Flight[V]) FinishWith(fn func() (V, error)) {
	c.step(func() (V, bool, error) {
		v, err := fn()
		return v, false, err
	})
}

// Finish hands v and err to c's callers and ends the flight: the next Do
// for its key starts a new one. Only the first call counts (a first step
// that panicked after handing its flight on may be finished twice).
func (c *Flight[V]) Finish(v V, err error) {
	if !c.over.CompareAndSwap(false, true) {
		return
	}
	c.v, c.err = v, err
	g := c.g
	g.finished.Add(1) // before the key leaves g: see Finished
	g.mu.Lock()
	if g.calls[c.key] == c {
		delete(g.calls, c.key)
	}
	done := c.done
	if done == nil {
		c.done = closed
	}
	g.mu.Unlock()
	if done != nil {
		close(done)
	}
}

// Forget makes the next Do for key start a new flight even if one is running,
// for instance after the key was invalidated while it was being fetched.
// Callers already waiting keep waiting for the old flight.
func (g *Group[V]) Forget(key string) {
	g.mu.Lock()
	delete(g.calls, key)
	g.mu.Unlock()
}

func panicError(r any) error {
	if e, ok := r.(error); ok {
		return fmt.Errorf("%w: %w\n\n%s", ErrPanicked, e, debug.Stack())
	}
	return fmt.Errorf("%w: %v\n\n%s", ErrPanicked, r, debug.Stack())
}
