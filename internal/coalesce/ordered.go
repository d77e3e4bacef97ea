package coalesce

import (
	"context"
	"sync"
)

// Ordered collapses calls for one key like Group, with one more rule: a
// caller joins a call only if that call started after the caller arrived.
// A caller that finds an older call in flight waits for it to end, then
// joins (or starts) the next one, so at most one call per key runs at a
// time and none answers a caller with what was fetched before it asked.
//
// The proxy uses it for forced refreshes (a client's Cache-Control:
// no-cache, RFC 9111 §5.2.1.4): the client must get an answer fetched
// after its request, yet a flood of no-cache requests must cost the
// upstream what one slow client would — one call at a time per key.
//
// The zero value is ready to use; an Ordered must not be copied after
// first use.
type Ordered[V any] struct {
	mu    sync.Mutex
	seq   uint64
	calls map[string]*orderedCall[V]
}

type orderedCall[V any] struct {
	started uint64
	done    chan struct{}
	v       V
	err     error
}

// Arrive stamps a caller's arrival; pass the stamp to Do. Take it when the
// request arrives, before anything it might wait for.
func (g *Ordered[V]) Arrive() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seq++
	return g.seq
}

// Do returns the result of a call of fn for key that started after
// arrival: the one in flight if it did, else the next one, which this
// caller starts when no call is in flight. fn runs on its own goroutine
// with context.WithoutCancel(ctx) of the caller that started it, and must
// bound itself; a caller whose ctx ends stops waiting. leader reports
// whether this caller started the call. A panic in fn is every waiter's
// error (ErrPanicked).
func (g *Ordered[V]) Do(ctx context.Context, key string, arrival uint64, fn func(context.Context) (V, error)) (v V, leader bool, err error) {
	for {
		if err := ctx.Err(); err != nil {
			return v, false, err
		}
		g.mu.Lock()
		c := g.calls[key]
		if c == nil {
			if g.calls == nil {
				g.calls = map[string]*orderedCall[V]{}
			}
			g.seq++
			c = &orderedCall[V]{started: g.seq, done: make(chan struct{})}
			g.calls[key] = c
			leader = true
			go g.run(context.WithoutCancel(ctx), key, c, fn)
		}
		g.mu.Unlock()
		join := leader || c.started > arrival
		select {
		case <-c.done:
			if join {
				return c.v, leader, c.err
			}
		case <-ctx.Done():
			return v, leader, ctx.Err()
		}
	}
}

func (g *Ordered[V]) run(ctx context.Context, key string, c *orderedCall[V], fn func(context.Context) (V, error)) {
	defer func() {
		if r := recover(); r != nil {
			c.err = panicError(r)
		}
		g.mu.Lock()
		if g.calls[key] == c {
			delete(g.calls, key)
		}
		g.mu.Unlock()
		close(c.done)
	}()
	c.v, c.err = fn(ctx)
}
