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
	"sync/atomic"

	"golang.org/x/sync/singleflight"
)

// ErrPanicked is wrapped by the error every caller of a flight gets when fn
// panicked. The error's text carries the panic value and fn's stack.
var ErrPanicked = errors.New("coalesce: fn panicked")

// Group is a namespace of keys. The zero value is ready to use; a Group must
// not be copied after first use.
type Group[V any] struct {
	sf singleflight.Group
}

// result is what a flight hands its callers. leader identifies the caller
// whose fn ran, so each caller can tell whether it was that one: singleflight
// reports shared=true to the leader too once anyone joined.
type result[V any] struct {
	v      V
	leader *atomic.Bool
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
// error). This matters because singleflight.DoChan re-panics in a fresh
// goroutine when fn panics, which nothing can recover. fn must not call
// runtime.Goexit (t.FailNow in a test): singleflight then delivers no result,
// and the waiters wait until their ctx ends.
func (g *Group[V]) Do(ctx context.Context, key string, fn func(ctx context.Context) (V, error)) (v V, leader bool, err error) {
	if err := ctx.Err(); err != nil {
		return v, false, err
	}
	ran := new(atomic.Bool)
	flightCtx := context.WithoutCancel(ctx)
	ch := g.sf.DoChan(key, func() (res any, err error) {
		ran.Store(true)
		defer func() {
			if r := recover(); r != nil {
				res, err = result[V]{leader: ran}, panicError(r)
			}
		}()
		v, err := fn(flightCtx)
		return result[V]{v: v, leader: ran}, err
	})
	select {
	case r := <-ch:
		res := r.Val.(result[V])
		return res.v, res.leader == ran, r.Err
	case <-ctx.Done():
		return v, ran.Load(), ctx.Err()
	}
}

// Forget makes the next Do for key start a new flight even if one is running,
// for instance after the key was invalidated while it was being fetched.
// Callers already waiting keep waiting for the old flight.
func (g *Group[V]) Forget(key string) {
	g.sf.Forget(key)
}

func panicError(r any) error {
	if e, ok := r.(error); ok {
		return fmt.Errorf("%w: %w\n\n%s", ErrPanicked, e, debug.Stack())
	}
	return fmt.Errorf("%w: %v\n\n%s", ErrPanicked, r, debug.Stack())
}
