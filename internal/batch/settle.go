package batch

import (
	"encoding/binary"
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
// admitted, and refusing a retry would fail a good id for a bad one
// (a list refused 503 for another's bad id). What keeps them within
// the bounds is that a failed call shared by lists is retried once per
// list only while those retries fit; past that, its ids once each
// (partitionLocked, classesLocked): one retry per list, each holding
// that list's ids again, had 200 lists over 96 ids queue 932 ids in a
// group bounded at 896. A list's retry counts as the list's ids
// (listed, retried: see over): counted as one-id misses', they took
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
//
// When the lists' retries would take the group's queue past MaxQueued
// (or the loader's past MaxQueuedAll), the lists' ids are retried by
// class instead (classesLocked): each id once, so that the retries of a
// call never hold more ids than it did, however many lists share it.
func (l *Loader[A, V]) partitionLocked(b *batch[A, V], err error, suspect, halve bool) {
	var parts []*retryPart[A, V]
	byOwner := make(map[*Requester]*retryPart[A, V])
	n := 0 // the ids of one retry per request
	for i, r := range b.res {
		if r.solo || len(r.reqs) == 0 {
			// A one-id request's own call: with its own arg, when its
			// waiter makes one (RetryArger).
			arg := b.arg
			if ra, ok := r.then.(RetryArger[A]); ok {
				arg = ra.RetryArg(arg)
			}
			parts = append(parts, &retryPart[A, V]{arg: arg, ids: b.ids[i : i+1 : i+1], res: b.res[i : i+1 : i+1]})
			n++
			continue
		}
		for _, o := range r.reqs {
			p := byOwner[o]
			if p == nil {
				p = &retryPart[A, V]{owner: o, arg: ownArg(o, b.arg)}
				byOwner[o] = p
				parts = append(parts, p)
			}
			if len(p.res) > 0 && p.res[len(p.res)-1] == r {
				continue // o joined the id twice
			}
			p.ids, p.res = append(p.ids, b.ids[i]), append(p.res, r)
			n++
		}
	}
	classes := !l.retriesFitLocked(b.g, n)
	if classes {
		parts = l.classesLocked(b, parts)
	}
	if len(parts) == 1 {
		if !halve {
			failLocked(b.res, err)
			return
		}
		b.owner = parts[0].owner
		if classes {
			b.owner = richest(parts[0].owners, 2)
		}
		l.halveLocked(b, err)
		return
	}
	var rd *round
	if suspect {
		rd = &round{}
	}
	next := make([]*batch[A, V], 0, len(parts))
	var broke []*retryPart[A, V]
	for _, p := range parts {
		if classes && p.owners != nil {
			// Paid by the owner with the most calls left: a list in
			// several classes pays for one each while the others can.
			if p.owner = richest(p.owners, 1); p.owner != nil {
				p.arg = ownArg(p.owner, b.arg)
			}
		}
		if (p.owner != nil || p.owners != nil) && (p.owner == nil || !p.owner.afford(1)) {
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

// retryPart is one retry partitionLocked makes of a failed shared call:
// a one-id request's id (owner nil), a list request's ids (owner), or a
// class of ids the same lists wait on (owners; owner: who pays).
type retryPart[A, V any] struct {
	owner  *Requester
	owners []*Requester
	arg    A
	ids    []string
	res    []*result[V]
}

// retriesFitLocked reports whether n more ids of retries keep g within
// MaxQueued and the loader within MaxQueuedAll. l.mu must be held.
func (l *Loader[A, V]) retriesFitLocked(g *group[A, V], n int) bool {
	return (l.opts.MaxQueued <= 0 || int(g.queued)+n <= l.opts.MaxQueued) &&
		(l.opts.MaxQueuedAll <= 0 || l.queued+n <= l.opts.MaxQueuedAll)
}

// classesLocked replaces the lists' parts of parts (one per list, each
// holding all its ids of the failed call b) by one part per class of
// b's ids: the ids the same set of lists waits on. Each id is then held
// once, however many lists share it; and a class's ids are asked by
// every list of its set, so its call holds only ids each of them asked
// for: a good list's ids ride in calls that hold no other list's bad
// id, and answer in one call, as in a retry of its own. A class whose
// call fails holds a bad id of each of its lists; its halves are paid by
// one of them (partitionLocked, halveLocked). The calls are at most one
// per id of b, what its ids would have cost unbatched. l.mu must be held.
func (l *Loader[A, V]) classesLocked(b *batch[A, V], parts []*retryPart[A, V]) []*retryPart[A, V] {
	kept := parts[:0]
	for _, p := range parts {
		if p.owner == nil {
			kept = append(kept, p)
		}
	}
	index := make(map[*Requester]int)
	byKey := make(map[string]*retryPart[A, V])
	var key []byte
	var set []int
	for i, r := range b.res {
		if r.solo || len(r.reqs) == 0 {
			continue // a one-id request's part, kept
		}
		set = set[:0]
		for _, o := range r.reqs {
			k, ok := index[o]
			if !ok {
				k = len(index)
				index[o] = k
			}
			set = append(set, k)
		}
		slices.Sort(set)
		set = slices.Compact(set)
		key = key[:0]
		for _, k := range set {
			key = binary.AppendUvarint(key, uint64(k))
		}
		p := byKey[string(key)]
		if p == nil {
			p = &retryPart[A, V]{owners: slices.Compact(slices.Clone(r.reqs)), arg: b.arg}
			byKey[string(key)] = p
			kept = append(kept, p)
		}
		p.ids, p.res = append(p.ids, b.ids[i]), append(p.res, r)
	}
	return kept
}

// richest is the request of reqs with the most calls left, if it can
// afford cost of them (not counted here); nil: none can.
func richest(reqs []*Requester, cost int) *Requester {
	var best *Requester
	for _, r := range reqs {
		if best == nil || r.left() > best.left() {
			best = r
		}
	}
	if best == nil || best.left() < cost {
		return nil
	}
	return best
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
