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
// not need: the result is handed over in the call itself, not boxed into an
// interface and sent on a channel per caller, so a flight costs the call,
// its channel and its goroutine (a miss on a batched route pays it once
// per request).
type Group[V any] struct {
	mu    sync.Mutex
	calls map[string]*call[V]
}

// call is one flight: v and err are written once, before done is closed.
type call[V any] struct {
	done chan struct{}
	ran  atomic.Bool // fn has started
	v    V
	err  error
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
		go g.run(context.WithoutCancel(ctx), key, c, fn)
	}
	select {
	case <-c.done:
		return c.v, leader, c.err
	case <-ctx.Done():
		return v, leader && c.ran.Load(), ctx.Err()
	}
}

// join returns key's flight in progress, or a new one that the caller
// (leader) must run.
func (g *Group[V]) join(key string) (c *call[V], leader bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c = g.calls[key]; c != nil {
		return c, false
	}
	if g.calls == nil {
		g.calls = make(map[string]*call[V])
	}
	c = &call[V]{done: make(chan struct{})}
	g.calls[key] = c
	return c, true
}

func (g *Group[V]) run(ctx context.Context, key string, c *call[V], fn func(context.Context) (V, error)) {
	g.step(key, c, func() (V, bool, error) {
		v, err := fn(ctx)
		return v, false, err
	})
}

// Then is the part of a flight that may outlast its leader's wait: DoThen
// runs it on its own goroutine.
type Then[V any] func(ctx context.Context) (V, error)

// DoThen is Do for a flight whose first step is short and usually
// answers: first runs on the goroutine of the caller that starts the
// flight, and only when it returns a non-nil then does the flight go on, on
// its own goroutine, with then. Callers that join meanwhile wait as in Do.
//
// This is for the proxy's fill, whose first step is a cache read: on a hit
// that is the whole flight, and running it on a fresh goroutine cost the
// goroutine, its stack growing to the Redis client's depth on every read
// (runtime.newstack, 12 % of the process's CPU on an L2 hit), and the
// wake-up of the parked caller it hands the answer to. The leader cannot
// stop waiting while first runs, so first must be bounded by something
// short (the L2 timeout); then, like Do's fn, may take as long as the
// upstream does, and the leader stops waiting for it when its ctx ends. A
// panic or runtime.Goexit in either is every caller's error, as in Do.
func (g *Group[V]) DoThen(ctx context.Context, key string, first func(ctx context.Context) (V, Then[V], error)) (v V, leader bool, err error) {
	if err := ctx.Err(); err != nil {
		return v, false, err
	}
	c, leader := g.join(key)
	if leader {
		flightCtx := context.WithoutCancel(ctx)
		var then Then[V]
		if !g.step(key, c, func() (V, bool, error) {
			v, t, err := first(flightCtx)
			then = t
			return v, t != nil, err
		}) {
			return c.v, true, c.err
		}
		go g.run(flightCtx, key, c, then)
	}
	select {
	case <-c.done:
		return c.v, leader, c.err
	case <-ctx.Done():
		return v, leader && c.ran.Load(), ctx.Err()
	}
}

// step runs one step of c's flight. Unless the step reports that the flight
// goes on (more), it hands c's result to its callers, as it does when the
// step panics or calls runtime.Goexit.
func (g *Group[V]) step(key string, c *call[V], fn func() (v V, more bool, err error)) (more bool) {
	returned := false
	defer func() {
		if returned && more {
			return
		}
		if r := recover(); r != nil {
			c.err = panicError(r)
		} else if !returned {
			c.err = errGoexit
		}
		g.mu.Lock()
		if g.calls[key] == c {
			delete(g.calls, key)
		}
		g.mu.Unlock()
		close(c.done)
	}()
	c.ran.Store(true)
	c.v, more, c.err = fn()
	returned = true
	return more
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
