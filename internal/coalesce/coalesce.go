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
	g.mu.Lock()
	c := g.calls[key]
	if c == nil {
		if g.calls == nil {
			g.calls = make(map[string]*call[V])
		}
		c = &call[V]{done: make(chan struct{})}
		g.calls[key] = c
		leader = true
		go g.run(context.WithoutCancel(ctx), key, c, fn)
	}
	g.mu.Unlock()
	select {
	case <-c.done:
		return c.v, leader, c.err
	case <-ctx.Done():
		return v, leader && c.ran.Load(), ctx.Err()
	}
}

func (g *Group[V]) run(ctx context.Context, key string, c *call[V], fn func(context.Context) (V, error)) {
	returned := false
	defer func() {
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
	c.v, c.err = fn(ctx)
	returned = true
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
