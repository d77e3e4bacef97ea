package batch

import (
	"context"
	"fmt"
	"time"
)

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
// than MaxInFlight calls in flight, oldest first, but for the batches of
// one-id loads (a nil Requester), of which the oldest goes ahead of the
// others every other call (jumpLocked). An id already waiting in a
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
// leaves with ctx.Err(); its id stays in the batch, which goes on while
// anyone else waits on one of its ids: a batch not yet sent that nobody
// waits on any more is dropped, without a call (Options.OnDrop).
//
// With Options.MaxQueued, a Load whose id would overfill its group's
// queue fails at once with ErrQueueFull; with Options.Deadline, one whose
// batch is not sent in time fails with ErrDeadline.
func (l *Loader[A, V]) Load(ctx context.Context, group string, arg A, id string) (v V, found bool, err error) {
	return l.LoadAs(ctx, nil, group, arg, id)
}

// LoadAs is Load for one id of the client request req (nil: a request of
// that one id), whose account bounds the calls its ids cause (Requester).
func (l *Loader[A, V]) LoadAs(ctx context.Context, req *Requester, group string, arg A, id string) (v V, found bool, err error) {
	if err := ctx.Err(); err != nil {
		return v, false, err
	}
	key := keyOf(group)
	r, settled, err := l.join(ctx, req, key, func() A { return arg }, id, nil, nil)
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
		l.leave(key, r)
		return v, false, ctx.Err()
	}
}

// leave counts a LoadAs waiter on r gone; when r is then abandoned, the
// batches of the group keyed key that nobody waits on are dropped.
func (l *Loader[A, V]) leave(key groupKey, r *result[V]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.settled {
		return
	}
	r.waiting--
	if r.abandoned() {
		l.dropAbandonedLocked(l.groups.get(key))
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
	l.LoadTo(ctx, req, group, func() A { return arg }, id, thenFunc[V](then), nil)
}

// Waiter is told the outcome of a LoadTo, as LoadThen's then is.
type Waiter[V any] interface {
	Loaded(v V, found bool, err error)
}

// RetryArger is a Waiter of a one-id request that makes the arg of its
// id's isolation retry (partitionLocked) from the arg of the batch that
// failed, its opener's: the retry is that request's own call, so it may
// carry the request's own state rather than the opener's (the proxy: its
// headers, so that an answer made for the caller is its own). It is
// called under the loader's lock: it must be short and must not call the
// loader.
type RetryArger[A any] interface {
	RetryArg(opener A) A
}

// thenFunc is LoadThen's then as a Waiter (a func is pointer-shaped: the
// conversion allocates nothing).
type thenFunc[V any] func(v V, found bool, err error)

func (f thenFunc[V]) Loaded(v V, found bool, err error) { f(v, found, err) }

// LoadTo is LoadThen with a Waiter, and room for the id's result in s
// (nil: none): a caller that allocates for the load anyway (the proxy's
// batched miss) gives a pointer into that for both, and its load costs no
// closure and, when it adds its id to a batch, no result of its own.
//
// arg makes the load's arg, called (under the loader's lock, before
// LoadTo returns) only when the id opens a batch, the one load whose arg
// fetch receives: a caller whose arg is a copy of its own state made to
// outlive it (the proxy's request) copies it once per batch, not once
// per id. arg must be short and must not call the loader.
func (l *Loader[A, V]) LoadTo(ctx context.Context, req *Requester, group string, arg func() A, id string, w Waiter[V], s *Slot[V]) {
	var zero V
	if err := ctx.Err(); err != nil {
		w.Loaded(zero, false, err)
		return
	}
	r, settled, err := l.join(ctx, req, keyOf(group), arg, id, w, s)
	switch {
	case err != nil:
		w.Loaded(zero, false, err)
	case settled:
		w.Loaded(r.v, r.found, r.err)
	}
}

// join adds id to the open batch of the group keyed key, opening the group
// or the batch if needed, and starts what may start. A quarantined id gets
// a batch of its own instead, if req may still cause a call. The waiter is
// then's (LoadThen) or, when then is nil, one that waits on r.done
// (LoadAs). settled reports that r is settled already (its v, found and
// err are final, and then is not kept).
func (l *Loader[A, V]) join(ctx context.Context, req *Requester, key groupKey, arg func() A, id string, then Waiter[V], s *Slot[V]) (r *result[V], settled bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// An id Enlist put in a batch waits on it even once the loader is
	// closed: Close sends that batch, and its answer is coming.
	enlisted := true
	if r = l.enlistedLocked(req, id); r == nil {
		if l.closed {
			return nil, false, ErrClosed
		}
		enlisted = false
		r = l.joinLocked(ctx, req, key, arg, id, s, false)
	}
	if r.settled {
		return r, true, nil
	}
	r.wait(then)
	if then == nil && !enlisted {
		r.waiting++ // an enlisted id's list counts already (Enlist)
	}
	return r, false, nil
}

// wait adds a waiter to r, not yet settled: then, or (nil) one on
// r.done. Loader.mu must be held.
func (r *result[V]) wait(then Waiter[V]) {
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

// joinLocked is join's work on the loader's state; a new result is made
// in s, if given and not used yet, and open makes the arg of a batch it
// opens (LoadTo). l.mu must be held.
//
// A new id is refused (ErrQueueFull) when the group's queue or the
// loader's is full, unless admitted (Enlist admitted its list whole).
func (l *Loader[A, V]) joinLocked(ctx context.Context, req *Requester, key groupKey, open func() A, id string, s *Slot[V], admitted bool) *result[V] {
	if !l.q.empty() && l.q.has(id, l.opts.Now()) {
		return l.joinAloneLocked(ctx, req, open, id, s)
	}
	g := l.groups.get(key)
	if g != nil {
		if r := g.pending[id]; r != nil {
			// The batch holding id goes whatever req does: joining it causes
			// no upstream call, so it costs req nothing (a list whose ids
			// were pending in many other requests' batches ran out of budget
			// with a healthy upstream). Should that batch fail, req's retry
			// is paid from its account (partitionLocked).
			r.addRequester(req)
			return r
		}
	}
	if !admitted && l.fullLocked(g, 1, false) {
		return l.refuseLocked(1)
	}
	lone := false
	if g == nil {
		if l.groups.len() < l.opts.MaxGroups {
			g = l.newGroupLocked(key)
			l.groups.put(key, g)
		} else {
			g = &group[A, V]{key: key, pending: make(map[string]*result[V])}
			// A group of its own that is never registered: it is not
			// found again, and disappears with its one fetch.
			lone = true
			if l.opts.OnOverflow != nil {
				l.opts.OnOverflow()
			}
		}
	}
	b := g.open
	if b == nil && !req.open() {
		// Joining an open batch is free, as joining a pending id is: it
		// goes anyway. Only a batch req opens is a call of its own.
		return l.overBudgetLocked(id)
	}
	if b == nil {
		arg := open()
		b = &batch[A, V]{g: g, arg: arg, ctx: context.WithoutCancel(ctx)}
		if g.last > 1 {
			b.ids, b.res = make([]string, 0, g.last), make([]*result[V], 0, g.last)
		}
		l.wg.Add(1)
		g.open = b
		if !lone {
			b.opened = time.Now()
			if g.inFlight == 0 {
				l.armLocked(g, l.opts.MaxWait)
			}
		}
	}
	r := s.result()
	r.addRequester(req)
	b.ids = append(b.ids, id)
	b.res = append(b.res, r)
	g.pending[id] = r
	listed := 0
	switch {
	case admitted:
		b.listed++
		listed = 1
	case req == nil:
		b.solo = true
	}
	l.queueLocked(g, 1, listed, 0)
	if lone || len(b.ids) >= l.opts.MaxSize {
		l.closeOpenLocked(g)
	}
	l.pumpLocked(g)
	return r
}

// joinAloneLocked fetches a quarantined id in a batch of its own, in a
// group of its own that is never registered, or fails it with ErrBudget
// when req (a list request) has no call left. l.mu must be held.
func (l *Loader[A, V]) joinAloneLocked(ctx context.Context, req *Requester, open func() A, id string, s *Slot[V]) *result[V] {
	if l.fullAllLocked(1, false) {
		return l.refuseLocked(1)
	}
	if req != nil && !req.afford(1) {
		return l.overBudgetLocked(id)
	}
	arg := open()
	r := s.result()
	g := &group[A, V]{} // its batch is never pending: nil map
	b := &batch[A, V]{g: g, arg: arg, ctx: context.WithoutCancel(ctx), ids: []string{id}, res: []*result[V]{r}, alone: true}
	l.wg.Add(1)
	g.ready = append(g.ready, b)
	l.queueLocked(g, 1, 0, 0)
	l.pumpLocked(g)
	return r
}

// newGroupLocked is a new group keyed key, to be registered: the spare
// (Loader.spare) when there is one. l.mu must be held.
func (l *Loader[A, V]) newGroupLocked(key groupKey) *group[A, V] {
	g := l.spare
	if g == nil {
		return &group[A, V]{key: key, pending: make(map[string]*result[V])}
	}
	l.spare = nil
	// Idle: open nil, ready empty, nothing in flight, and pending empty
	// (each id leaves it as its batch is dispatched: nextLocked), cleared
	// all the same, as a new map would be.
	g.key = key
	g.queued, g.listed, g.retried, g.jumped = 0, 0, 0, false
	clear(g.pending)
	return g
}

// Slot is room for the result of one id's load (LoadTo), in memory its
// caller allocates anyway. A load that adds its id to a batch keeps the
// id's result there, shared with the id's other waiters for as long as
// any of them or the batch refers to it; a slot is used once, and a
// LoadTo given a used one allocates. Its zero value is ready to use; the
// caller must not touch it otherwise.
type Slot[V any] struct {
	r    result[V]
	used bool
}

// result is a new id's result, held by the call it joins: in s unless s
// is nil or used. Loader.mu must be held.
func (s *Slot[V]) result() *result[V] {
	if s == nil || s.used {
		return &result[V]{held: 1}
	}
	s.used = true
	s.r.held = 1
	return &s.r
}

// fullLocked reports whether n more ids, a list's (Enlist) or a one-id
// miss's, would take the loader past MaxQueuedAll (fullAllLocked) or g
// past MaxQueued (over). A group with nothing queued (or none yet: nil)
// takes any one request the loader takes (MaxQueued). l.mu must be held.
func (l *Loader[A, V]) fullLocked(g *group[A, V], n int, list bool) bool {
	if l.fullAllLocked(n, list) {
		return true
	}
	if l.opts.MaxQueued <= 0 || g == nil || g.queued == 0 {
		return false
	}
	return over(int(g.queued), int(g.listed), int(g.retried), l.opts.MaxQueued, n, list)
}

// over reports whether n more ids, a list's or (list false) a one-id
// miss's, would take a queue of queued ids past bound, for a group's
// queue and the loader's alike; listed of them are lists', retried of
// those in lists' isolation retries (queueRetriesLocked), which hold
// each list's ids of a failed call again, once per list, while those
// retries fit the bound (else its ids once each: classesLocked).
//
// A list may not take the enlisted ids past the lists' share
// (listShare), so that one-id misses always find a quarter of the queue
// for themselves; retries need no room of the share (they are no new
// list), and hold up a new list only through the bound, as they would
// its calls. A one-id miss does not count against the bound the lists'
// ids past their share, retries included: those of a list an idle
// queue admitted whole, and the retries of a failed call shared by
// many lists. Counted, they refused a one-id read of a
// good id 503 for another client's bad id, though its batch goes ahead
// of theirs every other call (jumpLocked).
func over(queued, listed, retried, bound, n int, list bool) bool {
	share := listShare(bound)
	if list {
		return queued+n > bound || listed-retried+n > share
	}
	return queued-max(listed-share, 0)+n > bound
}

// listShare is the most ids lists may hold queued of bound: ¾ of it (at
// least 1). The rest is the one-id misses' own: a client sending long
// lists as fast as they are admitted kept the queue full, and every
// other client's one-id miss was refused 503.
func listShare(bound int) int {
	return max(bound-bound/4, 1)
}

// refuseLocked is the result of a Load refused as its group's queue (or
// the loader's) is full, and counts the n ids refused. l.mu must be held.
func (l *Loader[A, V]) refuseLocked(n int) *result[V] {
	if l.opts.OnDrop != nil {
		l.opts.OnDrop(ErrQueueFull, n)
	}
	return &result[V]{err: ErrQueueFull, settled: true}
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
