package batch

import "context"

// LoadAllTo is LoadTo for many one-id loads that reach the loader
// together: ids[i] joins with waiter ws[i] (a request of that one id, as
// LoadTo with a nil Requester), all under one hold of the loader's lock.
// They go out in group's open batch, or in as few batches as MaxSize
// makes, whoever else joins meanwhile: loads handed in one by one, each
// after a step of its own (a round trip to Redis), came one MaxWait
// window apart on a loaded machine and left in a call each. Each keeps
// what a one-id load has: its own isolation retry (a waiter that is a
// RetryArger makes its arg), the quarantine of a bad id (a batch of its
// own), and the queue's bounds (ErrQueueFull, told to that id's waiter
// alone).
//
// Each waiter is told once, as LoadTo's is: on the caller's goroutine,
// before LoadAllTo returns, for an id settled at once (an ended ctx, a
// closed loader, a full queue), else on the goroutine of the batch that
// settles it. arg makes the arg of a batch one of the ids opens (LoadTo).
func (l *Loader[A, V]) LoadAllTo(ctx context.Context, group string, arg func() A, ids []string, ws []Waiter[V]) {
	var zero V
	if err := ctx.Err(); err != nil {
		for _, w := range ws {
			w.Loaded(zero, false, err)
		}
		return
	}
	key := keyOf(group)
	now := make([]*result[V], len(ids)) // settled at once: told below, unlocked
	l.mu.Lock()
	for i, id := range ids {
		if l.closed {
			now[i] = &result[V]{err: ErrClosed, settled: true}
			continue
		}
		r := l.joinLocked(ctx, nil, key, arg, id, nil, false)
		if r.settled {
			now[i] = r
			continue
		}
		r.wait(ws[i])
	}
	l.mu.Unlock()
	for i, r := range now {
		if r != nil {
			ws[i].Loaded(r.v, r.found, r.err)
		}
	}
}
