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
// with ErrIsolate (or ErrSuspect, while the upstream answers) has the ids
// of each client request fetched again apart from the others', and one
// request's ids retried in halves, within a budget per client request, so
// that another client's good ids never fail for a bad id and no request
// costs the upstream more than ⌊2 + 2·log₂ n⌋ calls for its n ids (see
// Load and Requester). An id that failed alone after making a shared call
// fail is quarantined for a while: it is fetched in a call of its own and
// joins no batch.
package batch

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
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
// Errors that say the upstream is unwell (502, 503, 504, timeout, refused
// connection) must wrap neither it nor ErrSuspect: they fail the whole
// batch at once, with no retry, so a struggling upstream is not sent more
// calls.
var ErrIsolate = errors.New("batch: isolate")

// ErrSuspect, wrapped by an error a FetchFunc returns, says the failure may
// be caused by some of the ids or by the upstream: a 500 (RFC 9110
// §15.6.1, an unexpected condition, which an id the upstream's database
// cannot parse raises as readily as a broken database does). It is
// isolated as ErrIsolate is while the upstream is not judged down. The
// Loader judges it down when a round of isolation calls across client
// requests all failed, and up again at the next answer that is not such a
// failure: a down upstream is sent one round of retries, at most one per
// client request, and then none until it answers again.
var ErrSuspect = errors.New("batch: suspect")

// ErrBudget is wrapped by the error of an id left unfetched because its
// client request spent its calls (see Requester).
var ErrBudget = errors.New("batch: request's upstream call budget spent")

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

	// Quarantine is how long an id that made a shared call fail, and then
	// failed alone, is fetched in a call of its own rather than joining a
	// batch. 0 disables the quarantine.
	Quarantine time.Duration
	// MaxQuarantined bounds the ids quarantined at once; when full, the
	// oldest is forgotten. Values below 1 mean DefaultMaxQuarantined.
	MaxQuarantined int
	// Refused, if set, reports whether the value a one-id call found is
	// the upstream refusing the id (the proxy: its own 4xx answer), which
	// quarantines the id as an error would.
	Refused func(v any) bool
	// OnQuarantine, if set, is told the number of ids quarantined whenever
	// it changes, and OnEvict each id forgotten to make room.
	OnQuarantine func(n int)
	OnEvict      func()
	// OnBudget, if set, is told the number of ids failed with ErrBudget.
	OnBudget func(ids int)
	// Now is the clock of the quarantine; nil means time.Now.
	Now func() time.Time
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
	groups map[groupKey]*group[A, V]
	closed bool
	wg     sync.WaitGroup // batches not yet answered
	q      *quarantine
	// down: the last round of ErrSuspect isolation failed throughout,
	// and no call has been answered since; ErrSuspect is not isolated.
	down bool
}

// maxGroupKey is the longest group kept as its own map key. A longer one
// is keyed by its SHA-256, so the keys of MaxGroups groups hold at most
// MaxGroups·maxGroupKey bytes whatever the clients send; the usual group
// (a host and a credential) is shorter and costs no hash on each Load.
const maxGroupKey = 256

// groupKey names a group: the group itself, or its SHA-256 when longer
// than maxGroupKey (hashed, so a group that happens to be 32 bytes long
// never meets a hash).
type groupKey struct {
	s      string
	hashed bool
}

func keyOf(group string) groupKey {
	if len(group) <= maxGroupKey {
		return groupKey{s: group}
	}
	sum := sha256.Sum256([]byte(group))
	return groupKey{s: string(sum[:]), hashed: true}
}

// group is the state of one group. Guarded by Loader.mu.
type group[A, V any] struct {
	key      groupKey
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
	// retry: an isolation call, of owner's ids only (nil: one-id requests').
	retry bool
	owner *Requester
	round *round
	alone bool // a quarantined id's call of its own
}

// result is the outcome of one id of a batch, shared by all its waiters.
// v, found and err are written once, before settled is set, and only read
// after (by a LoadAs waiter once done is closed, by the goroutine that
// tells the LoadThen waiters); the other fields are guarded by Loader.mu.
// A settled result is never in a group's pending, so no waiter joins it
// after.
//
// After a shared call failed, the id may ride in several calls at once,
// one per list request waiting on it (see partitionLocked): the first
// call that answers it settles it for every waiter, and it fails only
// when the last call holding it failed.
type result[V any] struct {
	// done is made for the first LoadAs waiter and closed when settled:
	// a request that LoadThen finishes costs no channel.
	done chan struct{}
	// then and thens are the LoadThen waiters' (then the first one's).
	then  func(V, bool, error)
	thens []func(V, bool, error)
	v     V
	found bool
	err   error
	solo  bool         // a one-id client request waits on it
	reqs  []*Requester // the list requests waiting on it
	held  int          // calls holding it, queued or in flight
	// settled: v, found and err are final, done (if any) is closed.
	settled bool
	told    bool // its LoadThen waiters are being told (tellLocked)
}

// round is one isolation round of an ErrSuspect failure: the calls of each
// client request's ids apart. If none is answered, the upstream is down.
type round struct {
	pending  int
	answered bool
	failed   []string // its one-id calls that failed
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
	if opts.MaxQuarantined < 1 {
		opts.MaxQuarantined = DefaultMaxQuarantined
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Loader[A, V]{opts: opts, fetch: fetch, groups: make(map[groupKey]*group[A, V]),
		q: newQuarantine(opts.Quarantine, opts.MaxQuarantined)}
}

// Load returns the value for id, fetched together with the other ids loaded
// in the same group at about the same time.
//
// group names the callers that may share an upstream call: the proxy passes
// its forwarded headers, so one client's credentials never answer another's
// request. Different groups never share a batch. The loader keeps a group
// of up to 256 bytes as it is and a longer one as its SHA-256 (keyOf), so
// a long group string costs nothing past the call.
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
// If fetch fails with an error wrapping ErrIsolate (or ErrSuspect, while
// the upstream is not judged down), the batch's ids are fetched again, one
// call per client request waiting on them, queued ahead of newer batches;
// a call holding one list request's ids that fails again is halved,
// recursively, while the request has calls left (Requester). A one-id call
// that fails gives its error to that id's waiters as returned, and
// quarantines the id (Options.Quarantine). So a client request of n ids
// costs the upstream at most Budget(n) calls whatever it answers (once its
// ⌈n/MaxSize⌉ first calls fit in it), another request's good ids wait one
// more call at most for a bad id, and the whole isolation of a batch of
// requests costs at most one call per request past the first. Other errors
// (and panics, as ErrPanicked) fail every id of the failing fetch.
//
// found is false when the fetch answer lacks id. A waiter whose ctx ends
// leaves with ctx.Err(); its id stays in the batch, which goes on.
func (l *Loader[A, V]) Load(ctx context.Context, group string, arg A, id string) (v V, found bool, err error) {
	return l.LoadAs(ctx, nil, group, arg, id)
}

// LoadAs is Load for one id of the client request req (nil: a request of
// that one id), whose account bounds the calls its ids cause (Requester).
func (l *Loader[A, V]) LoadAs(ctx context.Context, req *Requester, group string, arg A, id string) (v V, found bool, err error) {
	if err := ctx.Err(); err != nil {
		return v, false, err
	}
	r, settled, err := l.join(ctx, req, keyOf(group), arg, id, nil)
	switch {
	case err != nil:
		return v, false, err
	case settled:
		return r.v, r.found, r.err
	}
	select {
	case <-r.done:
		return r.v, r.found, r.err
	case <-ctx.Done():
		return v, false, ctx.Err()
	}
}

// LoadThen is LoadAs without the wait: it joins id as LoadAs does and
// returns, and then is told the outcome once, on the goroutine of the
// batch that settles it, after the loader's lock is released (or on the
// caller's, before LoadThen returns, when it is settled at once: a closed
// loader, a spent budget, an ended ctx). Many loads thus cost the batch's
// goroutine and no goroutine or channel each.
//
// then must be short and must not block: the batch's other waiters are
// told after it. A panic in then is recovered, so that it neither takes
// the process down nor keeps the batch's other waiters from their
// answers, and is lost: then must guard its own (coalesce.Flight's
// FinishWith does).
func (l *Loader[A, V]) LoadThen(ctx context.Context, req *Requester, group string, arg A, id string, then func(v V, found bool, err error)) {
	var zero V
	if err := ctx.Err(); err != nil {
		then(zero, false, err)
		return
	}
	r, settled, err := l.join(ctx, req, keyOf(group), arg, id, then)
	switch {
	case err != nil:
		then(zero, false, err)
	case settled:
		then(r.v, r.found, r.err)
	}
}

// join adds id to the open batch of the group keyed key, opening the group
// or the batch if needed, and starts what may start. A quarantined id gets
// a batch of its own instead, if req may still cause a call. The waiter is
// then's (LoadThen) or, when then is nil, one that waits on r.done
// (LoadAs). settled reports that r is settled already (its v, found and
// err are final, and then is not kept).
func (l *Loader[A, V]) join(ctx context.Context, req *Requester, key groupKey, arg A, id string, then func(V, bool, error)) (r *result[V], settled bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// An id Enlist put in a batch waits on it even once the loader is
	// closed: Close sends that batch, and its answer is coming.
	if r = l.enlistedLocked(req, id); r == nil {
		if l.closed {
			return nil, false, ErrClosed
		}
		r = l.joinLocked(ctx, req, key, arg, id)
	}
	if r.settled {
		return r, true, nil
	}
	r.wait(then)
	return r, false, nil
}

// wait adds a waiter to r, not yet settled: then, or (nil) one on
// r.done. Loader.mu must be held.
func (r *result[V]) wait(then func(V, bool, error)) {
	switch {
	case then == nil && r.done == nil:
		r.done = make(chan struct{})
	case then == nil:
	case r.then == nil:
		r.then = then
	default:
		r.thens = append(r.thens, then)
	}
}

// joinLocked is join's work on the loader's state. l.mu must be held.
func (l *Loader[A, V]) joinLocked(ctx context.Context, req *Requester, key groupKey, arg A, id string) *result[V] {
	if l.q.has(id, l.opts.Now()) {
		return l.joinAloneLocked(ctx, req, arg, id)
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
		// The batch holding id goes whatever req does: joining it causes
		// no upstream call, so it costs req nothing (a list whose ids
		// were pending in many other requests' batches ran out of budget
		// with a healthy upstream). Should that batch fail, req's retry
		// is paid from its account (partitionLocked).
		r.addRequester(req)
		return r
	}
	b := g.open
	if b == nil && !req.open() {
		// Joining an open batch is free, as joining a pending id is: it
		// goes anyway. Only a batch req opens is a call of its own.
		return l.overBudgetLocked(id)
	}
	if b == nil {
		b = &batch[A, V]{g: g, arg: arg, ctx: context.WithoutCancel(ctx)}
		l.wg.Add(1)
		g.open = b
		if !lone {
			b.timer = time.AfterFunc(l.opts.MaxWait, func() { l.expire(b) })
		}
	}
	r := &result[V]{held: 1}
	r.addRequester(req)
	b.ids = append(b.ids, id)
	b.res = append(b.res, r)
	g.pending[id] = r
	if lone || len(b.ids) >= l.opts.MaxSize {
		l.closeOpenLocked(g)
	}
	l.pumpLocked(g)
	return r
}

// joinAloneLocked fetches a quarantined id in a batch of its own, in a
// group of its own that is never registered, or fails it with ErrBudget
// when req (a list request) has no call left. l.mu must be held.
func (l *Loader[A, V]) joinAloneLocked(ctx context.Context, req *Requester, arg A, id string) *result[V] {
	if req != nil && !req.afford(1) {
		return l.overBudgetLocked(id)
	}
	r := &result[V]{held: 1}
	g := &group[A, V]{pending: make(map[string]*result[V])}
	b := &batch[A, V]{g: g, arg: arg, ctx: context.WithoutCancel(ctx), ids: []string{id}, res: []*result[V]{r}, alone: true}
	l.wg.Add(1)
	g.ready = append(g.ready, b)
	l.pumpLocked(g)
	return r
}

// overBudgetLocked is the result of a Load whose list request has no call
// left. l.mu must be held.
func (l *Loader[A, V]) overBudgetLocked(id string) *result[V] {
	r := &result[V]{err: fmt.Errorf("%w: id %q", ErrBudget, id), settled: true}
	if l.opts.OnBudget != nil {
		l.opts.OnBudget(1)
	}
	return r
}

// addRequester records that req waits on r. l.mu must be held. Every list
// request is kept, however many: each gets the id in its own retry (see
// partitionLocked), so none depends on another's. They cost a pointer per
// Load still waiting.
func (r *result[V]) addRequester(req *Requester) {
	if req == nil {
		r.solo = true
	} else {
		r.reqs = append(r.reqs, req)
	}
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
		if !l.unsettledLocked(b) {
			continue
		}
		for i, id := range b.ids {
			if g.pending[id] == b.res[i] {
				delete(g.pending, id)
			}
		}
		g.inFlight++
		go l.run(b)
	}
}

// unsettledLocked leaves out of b, about to be fetched, the ids another
// call answered while b was queued, and reports whether any is left; a
// batch with none is dropped as answered, without a call. Only a retry can
// hold such ids: a shared id rides in each of its owners' retries
// (partitionLocked), and the halves of a failed retry are queued behind
// the retries already queued (queueRetriesLocked), which may answer their
// ids first. A dropped retry gives its owner back the call it paid for.
// l.mu must be held.
func (l *Loader[A, V]) unsettledLocked(b *batch[A, V]) bool {
	if !b.retry || !slices.ContainsFunc(b.res, func(r *result[V]) bool { return r.settled }) {
		return true
	}
	var ids []string
	var res []*result[V]
	for i, r := range b.res {
		if r.settled {
			r.held-- // answered: only a call's answer settles an id another call holds
			continue
		}
		ids, res = append(ids, b.ids[i]), append(res, r)
	}
	b.ids, b.res = ids, res
	if len(ids) > 0 {
		return true
	}
	if b.owner != nil {
		b.owner.calls--
	}
	l.settleLocked(b, nil, nil) // its round, if any, counts it answered
	l.wg.Done()
	return false
}

// run makes b's fetch, then answers its ids or queues their retries, and
// tells the LoadThen waiters of the ids it settled.
func (l *Loader[A, V]) run(b *batch[A, V]) {
	defer l.wg.Done()
	m, err := l.call(b)

	l.mu.Lock()
	g := b.g
	g.inFlight--
	l.settleLocked(b, m, err)
	tell := tellLocked(b.res)
	l.pumpLocked(g)
	if g.open == nil && len(g.ready) == 0 && g.inFlight == 0 && l.groups[g.key] == g {
		delete(l.groups, g.key)
	}
	l.mu.Unlock()
	for _, r := range tell {
		r.tell()
	}
}

// tellLocked marks the results of res that are settled and have LoadThen
// waiters not yet told, and returns them, to be told once the lock is
// released. l.mu must be held. A call settles only results it holds, so
// its own res are where to look.
func tellLocked[V any](res []*result[V]) []*result[V] {
	var out []*result[V]
	for _, r := range res {
		if r.settled && !r.told && r.then != nil {
			r.told = true
			if out == nil {
				out = make([]*result[V], 0, len(res))
			}
			out = append(out, r)
		}
	}
	return out
}

// tell gives r's outcome to its LoadThen waiters. r is settled, so
// nothing writes it any more.
func (r *result[V]) tell() {
	tellOne(r.then, r.v, r.found, r.err)
	for _, then := range r.thens {
		tellOne(then, r.v, r.found, r.err)
	}
}

// tellOne calls then, recovering a panic (see LoadThen).
func tellOne[V any](then func(V, bool, error), v V, found bool, err error) {
	defer func() { _ = recover() }()
	then(v, found, err)
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
