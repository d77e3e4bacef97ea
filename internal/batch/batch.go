// Package batch turns many single-id loads into one bulk fetch: the loads
// that arrive within a short window (or until the batch is full) share one
// upstream call, the way DataLoader batches a tick's worth of requests.
package batch

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// ErrClosed is returned by Load after Close.
var ErrClosed = errors.New("batch: loader closed")

// ErrPanicked is wrapped by the error every waiter of a batch gets when fetch
// panicked; a panic must not take the process down with it, nor strand the
// waiters.
var ErrPanicked = errors.New("batch: fetch panicked")

// Options bound a batch.
type Options struct {
	// MaxSize is the number of distinct ids at which a batch is fetched at
	// once. Values below 1 mean 1.
	MaxSize int
	// MaxWait is how long a batch stays open after its first Load. It is the
	// latency a lone request pays for the chance to share a call.
	MaxWait time.Duration
	// OnBatch, if set, is told the number of distinct ids of each batch as
	// it is fetched (the sidecache_batch_size histogram).
	OnBatch func(size int)
}

// FetchFunc fetches ids in one call. arg is the one given by the Load that
// opened the batch. Ids absent from the returned map are reported as not
// found; an error fails every waiter of the batch.
type FetchFunc[A, V any] func(ctx context.Context, arg A, ids []string) (map[string]V, error)

// Loader collects Loads into batches. It is safe for concurrent use.
type Loader[A, V any] struct {
	opts  Options
	fetch FetchFunc[A, V]

	mu     sync.Mutex
	open   map[string]*batch[A, V] // by group; at most one open batch each
	closed bool
	wg     sync.WaitGroup // running fetches
}

// batch is one future fetch. Its fields up to done are guarded by
// Loader.mu while it is open; res and err are written once before done is
// closed and only read after.
type batch[A, V any] struct {
	group string
	arg   A
	ctx   context.Context
	ids   []string
	seen  map[string]struct{}
	timer *time.Timer

	done chan struct{}
	res  map[string]V
	err  error
}

// New returns a Loader that fetches with fetch.
func New[A, V any](opts Options, fetch FetchFunc[A, V]) *Loader[A, V] {
	opts.MaxSize = max(opts.MaxSize, 1)
	return &Loader[A, V]{opts: opts, fetch: fetch, open: make(map[string]*batch[A, V])}
}

// Load returns the value for id, fetched together with the other ids loaded
// in the same group at about the same time.
//
// group names the callers that may share an upstream call: the proxy passes
// a hash of the forwarded headers, so one client's credentials never answer
// another's request. Different groups never share a batch.
//
// Load joins the open batch of group or opens one. The batch is fetched when
// it holds MaxSize distinct ids or MaxWait after it opened, whichever comes
// first; a later Load opens a new batch. Duplicate ids in one batch are
// fetched once and every waiter gets the value.
//
// fetch receives the arg of the caller that opened the batch and a context
// derived from that caller's ctx with context.WithoutCancel: no waiter's
// leaving cancels a fetch the others need, so fetch must bound itself.
//
// found is false when the fetch answer lacks id. A waiter whose ctx ends
// leaves with ctx.Err(); its id stays in the batch, which goes on.
func (l *Loader[A, V]) Load(ctx context.Context, group string, arg A, id string) (v V, found bool, err error) {
	if err := ctx.Err(); err != nil {
		return v, false, err
	}
	b, err := l.join(ctx, group, arg, id)
	if err != nil {
		return v, false, err
	}
	select {
	case <-b.done:
		if b.err != nil {
			return v, false, b.err
		}
		v, found = b.res[id]
		return v, found, nil
	case <-ctx.Done():
		return v, false, ctx.Err()
	}
}

// join adds id to the open batch of group, opening it if needed, and starts
// the fetch when the batch is full.
func (l *Loader[A, V]) join(ctx context.Context, group string, arg A, id string) (*batch[A, V], error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	b := l.open[group]
	if b == nil {
		b = &batch[A, V]{
			group: group,
			arg:   arg,
			ctx:   context.WithoutCancel(ctx),
			seen:  make(map[string]struct{}),
			done:  make(chan struct{}),
		}
		l.open[group] = b
		b.timer = time.AfterFunc(l.opts.MaxWait, func() { l.expire(b) })
	}
	if _, dup := b.seen[id]; !dup {
		b.seen[id] = struct{}{}
		b.ids = append(b.ids, id)
	}
	if len(b.ids) >= l.opts.MaxSize {
		l.dispatchLocked(b)
	}
	return b, nil
}

// expire fetches b when its MaxWait is up, unless it was already fetched
// because it filled up (its timer may fire while that happens).
func (l *Loader[A, V]) expire(b *batch[A, V]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[b.group] == b {
		l.dispatchLocked(b)
	}
}

// dispatchLocked closes b to new ids and fetches it in its own goroutine.
// l.mu must be held.
func (l *Loader[A, V]) dispatchLocked(b *batch[A, V]) {
	delete(l.open, b.group)
	b.timer.Stop()
	b.seen = nil
	l.wg.Add(1)
	go l.run(b)
}

func (l *Loader[A, V]) run(b *batch[A, V]) {
	defer l.wg.Done()
	defer close(b.done)
	defer func() {
		if r := recover(); r != nil {
			b.res, b.err = nil, fmt.Errorf("%w: %v\n\n%s", ErrPanicked, r, debug.Stack())
		}
	}()
	if l.opts.OnBatch != nil {
		l.opts.OnBatch(len(b.ids))
	}
	b.res, b.err = l.fetch(b.ctx, b.arg, b.ids)
}

// Close fetches the open batches now, waits for every running fetch to
// return, and makes later Loads fail with ErrClosed. It is for shutdown:
// waiters already queued still get their answers.
func (l *Loader[A, V]) Close() {
	l.mu.Lock()
	l.closed = true
	for _, b := range l.open {
		l.dispatchLocked(b)
	}
	l.mu.Unlock()
	l.wg.Wait()
}
