package batch

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// settleLocked answers b's ids with its call's outcome, or queues their
// retries when the failure may be one id's (ErrIsolate; ErrSuspect while
// the upstream is not judged down) or was the ids' together (ErrApart:
// each client request's apart, never halved). l.mu must be held.
//
// A shared call that failed is retried once per client request waiting on
// it, each call holding only that request's ids (partitionLocked): a bad id
// then fails only the request that asked for it, and every other request
// waits one more call, never a search. One request's ids that fail
// together are halved (halveLocked), within the request's budget.
func (l *Loader[A, V]) settleLocked(b *batch[A, V], a answers[V], err error) {
	now := l.opts.Now()
	panicked := errors.Is(err, ErrPanicked)
	isolable := err != nil && !panicked && errors.Is(err, ErrIsolate)
	suspect := err != nil && !panicked && !isolable && errors.Is(err, ErrSuspect)
	// The upstream answered, about the ids (an answer too large for them
	// together, ErrApart, is an answer too).
	answered := err == nil || isolable || err != nil && !panicked && errors.Is(err, ErrApart)
	if answered {
		l.down = false
	}
	try := isolable || suspect && !l.down
	if rd := b.round; rd != nil {
		rd.pending--
		rd.answered = rd.answered || answered
		if suspect && len(b.ids) == 1 {
			// Whether the id or the upstream is at fault shows when the
			// round is over: quarantine it only if another call was answered.
			rd.failed = append(rd.failed, b.ids[0])
			try = false
		}
		if rd.pending == 0 {
			l.down = !rd.answered
			for _, id := range rd.failed {
				if rd.answered {
					l.quarantineLocked(id, now)
				}
			}
		}
	}
	if err == nil {
		l.answerLocked(b, a, now)
		return
	}
	if !panicked && errors.Is(err, ErrApart) && !b.retry && len(b.ids) > 1 {
		if l.opts.OnIsolate != nil {
			l.opts.OnIsolate(len(b.ids))
		}
		l.partitionLocked(b, err, false, false)
		return
	}
	if suspect && l.down && !b.retry && len(b.ids) > 1 {
		// Judged down, but a round of bad ids alone (two attackers)
		// judges so too: a shared call is still split once per client
		// request, never halved, so a victim's ids get a call of their
		// own and fail only if that fails too. Each request pays one call
		// of its budget: a down upstream sees at most twice its unbatched
		// load, never a search.
		if l.opts.OnIsolate != nil {
			l.opts.OnIsolate(len(b.ids))
		}
		l.partitionLocked(b, err, suspect, false)
		return
	}
	if !try || len(b.ids) == 1 {
		if try && (b.retry || b.alone) {
			l.quarantineLocked(b.ids[0], now) // it failed alone after failing a shared call
		}
		failLocked(b.res, err)
		return
	}
	if l.opts.OnIsolate != nil {
		l.opts.OnIsolate(len(b.ids))
	}
	if b.retry {
		l.halveLocked(b, err)
		return
	}
	l.partitionLocked(b, err, suspect, true)
}

// answerLocked gives each id of b its value, unless another call holding
// it answered first. A one-id retry or quarantined call whose value the
// upstream refused quarantines the id; one answered releases it.
func (l *Loader[A, V]) answerLocked(b *batch[A, V], a answers[V], now time.Time) {
	for i, r := range b.res {
		r.answer(a.get(b.ids, i))
	}
	if len(b.ids) != 1 || !b.retry && !b.alone {
		return
	}
	if v, found := a.get(b.ids, 0); found && l.opts.Refused != nil && l.opts.Refused(v) {
		l.quarantineLocked(b.ids[0], now)
	} else if b.alone {
		l.q.release(b.ids[0])
		if l.opts.OnQuarantine != nil {
			l.opts.OnQuarantine(l.q.size())
		}
	}
}

// answer settles r with v, found, if no other call did, and releases the
// hold of the call that answered it. Loader.mu must be held.
func (r *result[V]) answer(v V, found bool) {
	r.held--
	if !r.settled {
		r.v, r.found = v, found
		r.settle()
	}
}

// settle marks r's outcome final and wakes its LoadAs waiters (its
// LoadThen waiters are told by the call's run, once the lock is
// released). Loader.mu must be held.
func (r *result[V]) settle() {
	r.settled = true
	if r.done != nil {
		close(r.done)
	}
}

// fail releases the hold of a call that failed on r, and settles r with
// err if it was the last call holding r and none answered it. It reports
// whether it settled r. Loader.mu must be held.
func (r *result[V]) fail(err error) bool {
	r.held--
	if r.settled || r.held > 0 {
		return false
	}
	r.err = err
	r.settle()
	return true
}

func (l *Loader[A, V]) quarantineLocked(id string, now time.Time) {
	if l.opts.Quarantine <= 0 {
		return
	}
	if l.q.add(id, now) && l.opts.OnEvict != nil {
		l.opts.OnEvict()
	}
	if l.opts.OnQuarantine != nil {
		l.opts.OnQuarantine(l.q.size())
	}
}

// failLocked releases a failed call's hold on res (see result.fail).
func failLocked[V any](res []*result[V], err error) {
	for _, r := range res {
		r.fail(err)
	}
}

// failBudgetLocked releases the hold, on res, of a failed call whose
// client request has no call left: an id no other call holds fails with
// ErrBudget.
func (l *Loader[A, V]) failBudgetLocked(res []*result[V], err error) {
	err = fmt.Errorf("%w: %w", ErrBudget, err)
	n := 0
	for _, r := range res {
		if r.fail(err) {
			n++
		}
	}
	if l.opts.OnBudget != nil && n > 0 {
		l.opts.OnBudget(n)
	}
}

// queueRetriesLocked queues retries of g ahead of its newer batches, behind
// the retries already queued: a victim's retry never waits behind the
// halves of a list that failed after it was queued.
//
// They are queued whatever the bounds (MaxQueued): their ids were
// admitted, and refusing a retry would fail a good id for a bad one. A
// list's retry counts as the list's ids (listed, retried: see over): a
// failed call shared by n lists is retried once per list, each retry
// holding that list's ids again, so 200 lists over 96 ids queued 932
// ids in a group bounded at 896. Counted as one-id misses', they took
// the misses' own quarter of the queue, and a one-id read of a good id
// was refused 503 (ErrQueueFull) for another client's bad id (the
// invariant soak's crowd round with list-crowd-bad).
func (l *Loader[A, V]) queueRetriesLocked(g *group[A, V], next []*batch[A, V]) {
	var now time.Time
	if l.opts.Deadline != nil {
		now = time.Now()
	}
	for _, b := range next {
		b.opened = now // its Deadline's start; never an open batch
		if b.owner != nil {
			b.listed = int32(len(b.ids))
		}
		l.queueLocked(g, len(b.ids), int(b.listed), int(b.listed))
	}
	i := 0
	for i < len(g.ready) && g.ready[i].retry {
		i++
	}
	g.ready = slices.Insert(g.ready, i, next...)
}

// partitionLocked queues one retry per client request waiting on the
// failed shared call b, holding the ids that request waits on (see
// queueRetriesLocked). A one-id request's id goes alone (the one retry
// such a request may cause). A list request's retry holds all of its ids,
// those it shares with other lists too: a shared id rides in each of its
// owners' retries, costing the upstream one id more per owner, never a
// call more, and is answered by the first that answers it (result), so an
// attacker's halving never decides a victim's id. A list request pays one
// call of its budget for its retry; one without calls left releases its
// ids, which fail only if no other retry holds them. If b held one
// request's ids only, they are halved instead (with halve; else they
// fail). The retries of a suspect failure form a round: if none is
// answered, the upstream is judged down.
func (l *Loader[A, V]) partitionLocked(b *batch[A, V], err error, suspect, halve bool) {
	type part struct {
		owner *Requester
		arg   A
		ids   []string
		res   []*result[V]
	}
	var parts []*part
	byOwner := make(map[*Requester]*part)
	for i, r := range b.res {
		if r.solo || len(r.reqs) == 0 {
			// A one-id request's own call: with its own arg, when its
			// waiter makes one (RetryArger).
			arg := b.arg
			if ra, ok := r.then.(RetryArger[A]); ok {
				arg = ra.RetryArg(arg)
			}
			parts = append(parts, &part{arg: arg, ids: b.ids[i : i+1 : i+1], res: b.res[i : i+1 : i+1]})
			continue
		}
		for _, o := range r.reqs {
			p := byOwner[o]
			if p == nil {
				p = &part{owner: o, arg: ownArg(o, b.arg)}
				byOwner[o] = p
				parts = append(parts, p)
			}
			if len(p.res) > 0 && p.res[len(p.res)-1] == r {
				continue // o joined the id twice
			}
			p.ids, p.res = append(p.ids, b.ids[i]), append(p.res, r)
		}
	}
	if len(parts) == 1 {
		if !halve {
			failLocked(b.res, err)
			return
		}
		b.owner = parts[0].owner
		l.halveLocked(b, err)
		return
	}
	var rd *round
	if suspect {
		rd = &round{}
	}
	next := make([]*batch[A, V], 0, len(parts))
	var broke []*part
	for _, p := range parts {
		if p.owner != nil && !p.owner.afford(1) {
			broke = append(broke, p)
			continue
		}
		for _, r := range p.res {
			r.held++
		}
		next = append(next, &batch[A, V]{g: b.g, arg: p.arg, ctx: b.ctx, ids: p.ids, res: p.res, retry: true, owner: p.owner, round: rd, solo: p.owner == nil})
	}
	// b's hold on its ids is released once the retries and the broke
	// requests hold them; then the broke requests' are released, so an id
	// only they wait on fails with ErrBudget.
	for _, p := range broke {
		for _, r := range p.res {
			r.held++
		}
	}
	failLocked(b.res, err)
	for _, p := range broke {
		l.failBudgetLocked(p.res, err)
	}
	if rd != nil {
		rd.pending = len(next)
	}
	l.wg.Add(len(next))
	l.queueRetriesLocked(b.g, next)
}

// halveLocked queues (see queueRetriesLocked) the two halves of b, a
// failed call of one list request's ids, if the request has two calls
// left; else its ids are released (see failBudgetLocked). Ids another
// call has answered meanwhile are left out; one id left goes alone, for
// one call.
func (l *Loader[A, V]) halveLocked(b *batch[A, V], err error) {
	var ids []string
	var res []*result[V]
	for i, r := range b.res {
		if r.settled {
			r.held--
			continue
		}
		ids, res = append(ids, b.ids[i]), append(res, r)
	}
	if len(ids) == 0 {
		return
	}
	o := b.owner
	cost := min(len(ids), 2)
	if o == nil || !o.afford(cost) {
		l.failBudgetLocked(res, err)
		return
	}
	mid := len(ids) / 2
	arg := ownArg(o, b.arg)
	var next []*batch[A, V]
	if mid > 0 {
		next = append(next, &batch[A, V]{g: b.g, arg: arg, ctx: b.ctx, ids: ids[:mid:mid], res: res[:mid:mid], retry: true, owner: o})
	}
	next = append(next, &batch[A, V]{g: b.g, arg: arg, ctx: b.ctx, ids: ids[mid:], res: res[mid:], retry: true, owner: o})
	for _, r := range res {
		r.held++ // the halves' holds, then b's released
	}
	failLocked(res, err)
	l.wg.Add(len(next))
	l.queueRetriesLocked(b.g, next)
}
