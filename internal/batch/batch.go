// Package batch turns many single-id loads into one bulk fetch: the loads
// that arrive within a short window (or until the batch is full) share one
// upstream call, the way DataLoader batches a tick's worth of requests.
//
// The window adapts to load the way Nagle's algorithm does (RFC 896): while
// a bulk call for a group is in flight, new ids accumulate for the next one
// instead of leaving in a call of their own when MaxWait is up, so a busy
// upstream sees fewer, fuller calls, and an idle one still sees a lone id
// after MaxWait at most.
//
// A failed call need not fail every id in it: a fetch that marks its error
// with ErrIsolate has the batch retried in halves until only the ids that
// fail alone get an error (see Load).
package batch

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// Defaults for the zero values of Options.
const (
	DefaultMaxInFlight = 2
	DefaultMaxGroups   = 1024
)

// ErrClosed is returned by Load after Close.
var ErrClosed = errors.New("batch: loader closed")

// ErrPanicked is wrapped by the error every waiter of a batch gets when fetch
// panicked; a panic must not take the process down with it, nor strand the
// waiters. A panic is never isolated (see ErrIsolate).
var ErrPanicked = errors.New("batch: fetch panicked")

// ErrIsolate, wrapped by an error a FetchFunc returns, says the failure may
// be caused by some of the ids rather than by the upstream: a 4xx answer to
// the bulk call, or an answer the caller cannot split. The Loader then
// fetches the two halves of the batch separately, recursively, so that the
// ids that do not cause the failure get their values and each id that fails
// on its own gets the error of its own one-id fetch.
//
// Errors that say the upstream is unwell (5xx, timeout, refused connection)
// must not wrap it: they fail the whole batch at once, with no retry, so a
// struggling upstream is not sent more calls.
var ErrIsolate = errors.New("batch: isolate")

// Options bound a batch.
type Options struct {
	// MaxSize is the number of distinct ids at which a batch is closed to
	// new ids and fetched as soon as MaxInFlight allows. Values below 1
	// mean 1.
	MaxSize int
	// MaxWait is how long a batch stays open after its first Load when no
	// call of its group is in flight: the latency a lone request pays for
	// the chance to share a call. While a call is in flight, an open batch
	// goes when it is full or when the group has no call left in flight.
	MaxWait time.Duration
	// MaxInFlight bounds the bulk calls of one group at once, isolation
	// retries included. Values below 1 mean DefaultMaxInFlight.
	MaxInFlight int
	// MaxGroups bounds the groups that hold state at once (open, queued or
	// in-flight batches). A Load for a new group beyond it is fetched at
	// once in a batch of its own, outside any group: the caller's request
	// still gets its answer, and a client that varies its headers cannot
	// grow the loader's memory. Values below 1 mean DefaultMaxGroups.
	MaxGroups int
	// OnBatch, if set, is told the number of distinct ids of each fetch as
	// it starts (the sidecache_batch_size histogram). Isolation retries
	// count as fetches.
	OnBatch func(size int)
	// OnIsolate, if set, is told the size of each batch whose failure is
	// being isolated, just before its halves are queued.
	OnIsolate func(size int)
	// OnOverflow, if set, is called for each Load fetched alone because
	// MaxGroups groups exist.
	OnOverflow func()
}

// FetchFunc fetches ids in one call. arg is the one given by the Load that
// opened the batch. Ids absent from the returned map are reported as not
// found. An error fails every id of the call, unless it wraps ErrIsolate and
// the call had more than one id (see ErrIsolate).
type FetchFunc[A, V any] func(ctx context.Context, arg A, ids []string) (map[string]V, error)

// Loader collects Loads into batches. It is safe for concurrent use.
type Loader[A, V any] struct {
	opts  Options
	fetch FetchFunc[A, V]

	mu     sync.Mutex
	groups map[[sha256.Size]byte]*group[A, V]
	closed bool
	wg     sync.WaitGroup // batches not yet answered
}

// group is the state of one group. Guarded by Loader.mu.
type group[A, V any] struct {
	key      [sha256.Size]byte
	open     *batch[A, V]          // accepting ids; at most one
	ready    []*batch[A, V]        // closed to ids, waiting for a slot, oldest first
	pending  map[string]*result[V] // ids of open and ready batches
	inFlight int
}

// batch is one fetch to make. Its fields are guarded by Loader.mu until it
// is dispatched, and read only by its run after.
type batch[A, V any] struct {
	g       *group[A, V]
	arg     A
	ctx     context.Context
	ids     []string
	res     []*result[V] // res[i] is the outcome of ids[i]
	timer   *time.Timer  // nil for isolation halves and lone batches
	expired bool         // MaxWait is up
}

// result is the outcome of one id of a batch, shared by all its waiters.
// Its fields are written once before done is closed and only read after.
type result[V any] struct {
	done  chan struct{}
	v     V
	found bool
	err   error
}

// New returns a Loader that fetches with fetch.
func New[A, V any](opts Options, fetch FetchFunc[A, V]) *Loader[A, V] {
	opts.MaxSize = max(opts.MaxSize, 1)
	if opts.MaxInFlight < 1 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.MaxGroups < 1 {
		opts.MaxGroups = DefaultMaxGroups
	}
	return &Loader[A, V]{opts: opts, fetch: fetch, groups: make(map[[sha256.Size]byte]*group[A, V])}
}

// Load returns the value for id, fetched together with the other ids loaded
// in the same group at about the same time.
//
// group names the callers that may share an upstream call: the proxy passes
// its forwarded headers, so one client's credentials never answer another's
// request. Different groups never share a batch. The loader keeps only a
// SHA-256 of group, so a long group string costs nothing past the call.
//
// Load joins the open batch of group or opens one. The batch closes when it
// holds MaxSize distinct ids, or when MaxWait is up and no call of the group
// is in flight; a closed batch is fetched as soon as the group has fewer
// than MaxInFlight calls in flight, oldest first. An id already waiting in a
// batch not yet fetched shares that batch's answer; an id whose call is
// already in flight is fetched again.
//
// fetch receives the arg of the caller that opened the batch and a context
// derived from that caller's ctx with context.WithoutCancel: no waiter's
// leaving cancels a fetch the others need, so fetch must bound itself.
//
// If fetch fails with an error wrapping ErrIsolate, the batch is split in
// two halves that are queued, ahead of newer batches, and fetched the same
// way; a one-id fetch that fails gives its error to that id's waiters as
// returned. With b of the n ids failing, a batch costs at most
// 2·b·⌈log₂ n⌉ calls past the first, and never more than 2n−2. Other errors
// (and panics, as ErrPanicked) fail every id of the failing fetch.
//
// found is false when the fetch answer lacks id. A waiter whose ctx ends
// leaves with ctx.Err(); its id stays in the batch, which goes on.
func (l *Loader[A, V]) Load(ctx context.Context, group string, arg A, id string) (v V, found bool, err error) {
	if err := ctx.Err(); err != nil {
		return v, false, err
	}
	r, err := l.join(ctx, sha256.Sum256([]byte(group)), arg, id)
	if err != nil {
		return v, false, err
	}
	select {
	case <-r.done:
		return r.v, r.found, r.err
	case <-ctx.Done():
		return v, false, ctx.Err()
	}
}

// join adds id to the open batch of the group keyed key, opening the group
// or the batch if needed, and starts what may start.
func (l *Loader[A, V]) join(ctx context.Context, key [sha256.Size]byte, arg A, id string) (*result[V], error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	g := l.groups[key]
	lone := false
	if g == nil {
		g = &group[A, V]{key: key, pending: make(map[string]*result[V])}
		if len(l.groups) < l.opts.MaxGroups {
			l.groups[key] = g
		} else {
			// A group of its own that is never registered: it is not
			// found again, and disappears with its one fetch.
			lone = true
			if l.opts.OnOverflow != nil {
				l.opts.OnOverflow()
			}
		}
	}
	if r := g.pending[id]; r != nil {
		return r, nil
	}
	b := g.open
	if b == nil {
		b = &batch[A, V]{g: g, arg: arg, ctx: context.WithoutCancel(ctx)}
		l.wg.Add(1)
		g.open = b
		if !lone {
			b.timer = time.AfterFunc(l.opts.MaxWait, func() { l.expire(b) })
		}
	}
	r := &result[V]{done: make(chan struct{})}
	b.ids = append(b.ids, id)
	b.res = append(b.res, r)
	g.pending[id] = r
	if lone || len(b.ids) >= l.opts.MaxSize {
		l.closeOpenLocked(g)
	}
	l.pumpLocked(g)
	return r, nil
}

// expire marks b's MaxWait as up, if b still accepts ids.
func (l *Loader[A, V]) expire(b *batch[A, V]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b.g.open == b {
		b.expired = true
		l.pumpLocked(b.g)
	}
}

// closeOpenLocked queues g's open batch behind the ready ones. l.mu must be
// held.
func (l *Loader[A, V]) closeOpenLocked(g *group[A, V]) {
	b := g.open
	g.open = nil
	if b.timer != nil {
		b.timer.Stop()
	}
	g.ready = append(g.ready, b)
}

// pumpLocked starts g's fetches while it has slots: ready batches first,
// then the open batch if its MaxWait is up and g has nothing in flight (or
// the loader is closing). l.mu must be held.
func (l *Loader[A, V]) pumpLocked(g *group[A, V]) {
	for g.inFlight < l.opts.MaxInFlight {
		if len(g.ready) == 0 {
			if b := g.open; b == nil || !l.closed && !(b.expired && g.inFlight == 0) {
				break
			}
			l.closeOpenLocked(g)
		}
		b := g.ready[0]
		g.ready[0] = nil
		g.ready = g.ready[1:]
		for i, id := range b.ids {
			if g.pending[id] == b.res[i] {
				delete(g.pending, id)
			}
		}
		g.inFlight++
		go l.run(b)
	}
}

// run makes b's fetch, then answers its ids or queues its halves.
func (l *Loader[A, V]) run(b *batch[A, V]) {
	defer l.wg.Done()
	m, err := l.call(b)
	split := err != nil && len(b.ids) > 1 && errors.Is(err, ErrIsolate) && !errors.Is(err, ErrPanicked)
	if !split {
		for i, r := range b.res {
			if err != nil {
				r.err = err
			} else {
				r.v, r.found = m[b.ids[i]]
			}
			close(r.done)
		}
	} else if l.opts.OnIsolate != nil {
		l.opts.OnIsolate(len(b.ids))
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	g := b.g
	g.inFlight--
	if split {
		mid := len(b.ids) / 2
		h1 := &batch[A, V]{g: g, arg: b.arg, ctx: b.ctx, ids: b.ids[:mid], res: b.res[:mid]}
		h2 := &batch[A, V]{g: g, arg: b.arg, ctx: b.ctx, ids: b.ids[mid:], res: b.res[mid:]}
		l.wg.Add(2)
		g.ready = append([]*batch[A, V]{h1, h2}, g.ready...)
	}
	l.pumpLocked(g)
	if g.open == nil && len(g.ready) == 0 && g.inFlight == 0 && l.groups[g.key] == g {
		delete(l.groups, g.key)
	}
}

// call runs fetch, turning a panic into an error.
func (l *Loader[A, V]) call(b *batch[A, V]) (m map[string]V, err error) {
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("%w: %v\n\n%s", ErrPanicked, r, debug.Stack())
		}
	}()
	if l.opts.OnBatch != nil {
		l.opts.OnBatch(len(b.ids))
	}
	return l.fetch(b.ctx, b.arg, b.ids)
}

// Close fetches the open and queued batches now (still at most MaxInFlight
// per group at once), waits for every fetch to return, and makes later
// Loads fail with ErrClosed. It is for shutdown: waiters already queued
// still get their answers.
func (l *Loader[A, V]) Close() {
	l.mu.Lock()
	l.closed = true
	for _, g := range l.groups {
		l.pumpLocked(g)
	}
	l.mu.Unlock()
	l.wg.Wait()
}
