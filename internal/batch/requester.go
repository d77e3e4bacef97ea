package batch

import (
	"context"
	"math/bits"
)

// Requester is one client request's account with a Loader: the calls its
// ids may still cause past the ones they need anyway. Loads of one client
// request (the ids of a list) share one Requester; a Load with a nil
// Requester is a client request of one id. Its fields are guarded by the
// Loader's mutex.
type Requester struct {
	budget int // ListBudget(n, MaxSize)
	firsts int // ⌈n/MaxSize⌉: the first calls its ids need anyway
	calls  int // calls counted against it so far
	first  int // of which first calls
	// enlisted: the results of its ids Enlist put in batches (each a
	// *result[V] of its Loader), taken by their ids' Loads.
	enlisted map[string]any
	// own is the arg (an A of its Loader) Enlist was given: the
	// request's own, which its isolation retries carry (ownArg) rather
	// than the arg of the batch that failed, another request's when its
	// ids joined a batch that request opened.
	own any
}

// ownArg is the arg of a retry of r's ids of a failed call whose arg was
// opener: r's own (Enlist's), as a one-id request's retry carries its own
// (RetryArger). The proxy's arg carries the request's headers: an answer
// to a list's retry made with the opener's was, when private, no answer
// to the list, which fetched its ids once more (flight.foreign), past its
// budget of two for a list of one id (a 502 for a good id). opener when r
// has none (a nil r: a one-id request; a list that never enlisted).
func ownArg[A any](r *Requester, opener A) A {
	if r != nil {
		if a, ok := r.own.(A); ok {
			return a
		}
	}
	return opener
}

// afford reports whether r may cause cost more retries, keeping what its
// ids' first calls still need, and if so counts them.
func (r *Requester) afford(cost int) bool {
	if r.calls+max(r.firsts-r.first, 0)+cost > r.budget {
		return false
	}
	r.calls += cost
	return true
}

// left is how many more calls r may cause past what its ids' first calls
// still need (afford).
func (r *Requester) left() int {
	return r.budget - r.calls - max(r.firsts-r.first, 0)
}

// open counts a batch one of r's ids is opening, and reports whether r
// may open it: always for the first calls its ids need, then within its
// budget. Joining a batch already open costs r nothing, whoever opened it:
// that batch goes whatever r does (a list whose ids reached the loader
// over several windows, each joining a batch another request had opened,
// ran out of budget with a healthy upstream and answered 502). A batch r
// opened and its other ids join is counted once, here.
func (r *Requester) open() bool {
	if r == nil {
		return true
	}
	if r.first >= r.firsts && r.calls+1 > r.budget {
		return false
	}
	r.first++
	r.calls++
	return true
}

// Spend counts n calls that req's ids cause outside the loader (the
// proxy asks again, with the list's own headers, for ids whose answer was
// made for the request that opened their batch), and reports whether req
// could afford them within its Budget; if not, nothing is counted and the
// caller fails those ids. A nil req (a request of one id) has no account
// here: its one call of its own is the second its budget allows.
func (l *Loader[A, V]) Spend(req *Requester, n int) bool {
	if req == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return req.afford(n)
}

// Budget is the most upstream calls one client request of n ids may cause,
// whatever the upstream answers: 2 + 2·⌈log₂ n⌉. That is one shared call,
// one call of its own ids when the shared call failed, and two calls per
// halving of its ids (both halves are asked at once), ⌈log₂ n⌉ halvings
// down to one id: enough to find one bad id among n wherever it sits. It
// was ⌊2 + 2·log₂ n⌋, one call short for n not a power of two when the
// bad id sat in the larger half at each step (a 100-id list failed 502
// once in three runs of TestSplitBadIDBeyondMaxSize).
func Budget(n int) int {
	return 2 + 2*bits.Len(uint(max(n, 1)-1))
}

// Requester opens the account of one client request of n ids (a list;
// one-id requests pass a nil Requester to LoadAs). Of its Budget, the
// ⌈n/MaxSize⌉ calls its ids need anyway are set aside; the rest bounds the
// isolation calls and quarantined ids' own calls it may cause.
func (l *Loader[A, V]) Requester(n int) *Requester {
	n = max(n, 1)
	return &Requester{budget: ListBudget(n, l.opts.MaxSize), firsts: (n + l.opts.MaxSize - 1) / l.opts.MaxSize}
}

// ListBudget is Budget for a list of n ids whose calls hold at most
// maxSize ids each: Budget(n) up to maxSize, and past it one call more
// per first call past the first, ⌈n/maxSize⌉ − 1 + Budget(maxSize). A bad
// id fails one call of at most maxSize ids, and finding it there costs
// what finding it in a list of maxSize ids costs: with Budget(n) alone, a
// 1000-id list over max_size 100 spent 10 of its 21 calls on its first
// calls and ran out halving the failed call's 100 ids.
func ListBudget(n, maxSize int) int {
	if maxSize <= 0 || n <= maxSize {
		return Budget(n)
	}
	return (n+maxSize-1)/maxSize - 1 + Budget(maxSize)
}

// Enlist puts the ids of the list request req into the open batch(es) of
// group at once, under one lock, opening as many as they fill: its own
// first calls are then the ⌈n/MaxSize⌉ its Requester sets aside, however
// late its per-id Loads run. Each id's LoadAs or LoadThen with req then
// waits on the result Enlist made, joining for free even once its batch
// has gone. Without it a list's per-id goroutines, run late on a loaded
// machine, reached the loader over several max_wait windows, each opening
// a batch of its own, and a list of good ids ran out of its budget.
//
// Quarantined ids are left to their Loads (a call of their own, paid from
// req's account), as are all ids when ctx is done or the loader closed. An
// id whose Load never comes still rides in its batch, costing the upstream
// an id, not a call, while ctx lasts: once it ends, a batch that no other
// request waits on is dropped unsent (Options.OnDrop, ErrAbandoned).
//
// The list is admitted whole or not at all: when its ids not yet pending
// would take the group's queue past Options.MaxQueued, or the ids lists
// hold past their share of it (¾: listShare), none is enlisted
// and Enlist returns ErrQueueFull, for the caller to refuse the request
// (its Loads would be refused one by one).
func (l *Loader[A, V]) Enlist(ctx context.Context, req *Requester, group string, arg A, ids []string) error {
	if req == nil || ctx.Err() != nil {
		return nil
	}
	key := keyOf(group)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	now := l.opts.Now()
	if g := l.groups.get(key); l.opts.MaxQueued > 0 || l.opts.MaxQueuedAll > 0 {
		n := 0
		for _, id := range ids {
			if _, ok := req.enlisted[id]; !ok && (g == nil || g.pending[id] == nil) && !l.q.has(id, now) {
				n++
			}
		}
		if l.fullLocked(g, n, true) {
			l.refuseLocked(n)
			return ErrQueueFull
		}
	}
	if req.own == nil {
		req.own = arg
	}
	open := func() A { return arg }
	for _, id := range ids {
		if _, ok := req.enlisted[id]; ok || l.q.has(id, now) {
			continue
		}
		if req.enlisted == nil {
			req.enlisted = make(map[string]any, len(ids))
			context.AfterFunc(ctx, func() { l.leaveList(key, req) })
		}
		r := l.joinLocked(ctx, req, key, open, id, nil, true)
		if !r.settled {
			r.waiting++ // until its Load takes it (enlistedLocked), or ctx ends
		}
		req.enlisted[id] = r
	}
	return nil
}

// leaveList counts req gone from the results Enlist made for it that no
// Load of its took (the Loads that did leave themselves: LoadAs), once
// its ctx ended, and drops the batches of the group keyed key that nobody
// waits on any more.
func (l *Loader[A, V]) leaveList(key groupKey, req *Requester) {
	l.mu.Lock()
	defer l.mu.Unlock()
	gone := false
	for id, v := range req.enlisted {
		delete(req.enlisted, id)
		if r := v.(*result[V]); !r.settled {
			r.waiting--
			gone = gone || r.abandoned()
		}
	}
	if gone {
		l.dropAbandonedLocked(l.groups.get(key))
	}
}

// enlistedLocked takes the result Enlist made for req's id, if any: req
// is already among its requesters, and the result already held by its
// call. l.mu must be held.
func (l *Loader[A, V]) enlistedLocked(req *Requester, id string) *result[V] {
	if req == nil || req.enlisted == nil {
		return nil
	}
	r, ok := req.enlisted[id].(*result[V])
	if ok {
		delete(req.enlisted, id)
	}
	return r
}
