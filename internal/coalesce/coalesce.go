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
)

// ErrPanicked is wrapped by the error every caller of a flight gets when fn
// panicked. The error's text carries the panic value and fn's stack.
var ErrPanicked = errors.New("coalesce: fn panicked")

// errExited is the flight's error when fn ended its goroutine without
// returning (runtime.Goexit).
var errExited = errors.New("coalesce: fn exited without returning")

// Group is a namespace of keys. The zero value is ready to use; a Group must
// not be copied after first use.
type Group[V any] struct {
	mu    sync.Mutex
	calls map[string]*call[V]
}

// call is one flight: done is closed once v and err are set.
type call[V any] struct {
	done chan struct{}
	v    V
	err  error
}

// Then is the part of a flight that may outlast its leader's wait: DoThen
// runs it on its own goroutine.
type Then[V any] func(ctx context.Context) (V, error)

// Do runs fn once per key among concurrent callers and gives each the same
// answer.
//
// fn runs on its own goroutine and receives context.WithoutCancel(ctx) of
// the caller that started the flight: it keeps that caller's values but is
// not cancelled when that caller goes away, so the others still get the
// answer. fn must therefore bound itself (the proxy uses its upstream
// timeout).
//
// A caller whose ctx ends stops waiting and gets ctx.Err(); the flight goes
// on. leader reports whether this caller started the flight (false:
// collapsed onto another caller's flight).
//
// A panic in fn does not crash the process or hang the waiters: every caller
// gets an error wrapping ErrPanicked (and the panic value, when it is an
// error).
func (g *Group[V]) Do(ctx context.Context, key string, fn func(ctx context.Context) (V, error)) (v V, leader bool, err error) {
	return g.DoThen(ctx, key, func(context.Context) (v V, then Then[V], err error) { return v, fn, nil })
}

// DoThen is Do for a flight whose first step is short and usually
// answers: first runs on the goroutine of the caller that starts the
// flight, and only when it returns a non-nil then does the flight go on, on
// its own goroutine, with then. Callers that join meanwhile wait as in Do.
//
// This is for the proxy's fill, whose first step is a cache read: on a hit
// that is the whole flight, and running it on a fresh goroutine cost the
// goroutine, its stack growing to the Redis client's depth on every read,
// and the wake-ups of handing the answer back (a third of the sidecar's
// CPU above the read itself). The leader cannot stop waiting while first
// runs, so first must be bounded by something short (the L2 timeout); then,
// like Do's fn, may take as long as the upstream does, and the leader stops
// waiting for it when its ctx ends. A panic in either is every caller's
// error, as in Do.
func (g *Group[V]) DoThen(ctx context.Context, key string, first func(ctx context.Context) (V, Then[V], error)) (v V, leader bool, err error) {
	if err := ctx.Err(); err != nil {
		return v, false, err
	}
	g.mu.Lock()
	if c, ok := g.calls[key]; ok {
		g.mu.Unlock()
		return wait(ctx, c, false)
	}
	c := &call[V]{done: make(chan struct{})}
	if g.calls == nil {
		g.calls = map[string]*call[V]{}
	}
	g.calls[key] = c
	g.mu.Unlock()

	flightCtx := context.WithoutCancel(ctx)
	var then Then[V]
	g.run(key, c, func() (V, error) {
		v, t, err := first(flightCtx)
		then = t
		return v, err
	}, func() bool { return then == nil })
	if then == nil {
		return c.v, true, c.err
	}
	go g.run(key, c, func() (V, error) { return then(flightCtx) }, func() bool { return true })
	return wait(ctx, c, true)
}

// run runs step for c and, if last reports (after step) that it finished
// the flight, or step panicked or exited, hands its result to c's callers.
func (g *Group[V]) run(key string, c *call[V], step func() (V, error), last func() bool) {
	returned := false
	defer func() {
		if returned && !last() {
			return
		}
		if !returned {
			if r := recover(); r != nil {
				c.err = panicError(r)
			} else {
				c.err = errExited
			}
		}
		g.mu.Lock()
		if g.calls[key] == c {
			delete(g.calls, key)
		}
		g.mu.Unlock()
		close(c.done)
	}()
	c.v, c.err = step()
	returned = true
}

func wait[V any](ctx context.Context, c *call[V], leader bool) (v V, _ bool, err error) {
	select {
	case <-c.done:
		return c.v, leader, c.err
	case <-ctx.Done():
		return v, leader, ctx.Err()
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
