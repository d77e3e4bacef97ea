package batch

import (
	"errors"
	"fmt"
	"time"
)

// settleLocked answers b's ids with its call's outcome, or queues their
// retries when the failure may be one id's (ErrIsolate; ErrSuspect while
// the upstream is not judged down). l.mu must be held.
//
// A shared call that failed is retried once per client request waiting on
// it, each call holding only that request's ids (partitionLocked): a bad id
// then fails only the request that asked for it, and every other request
// waits one more call, never a search. One request's ids that fail
// together are halved (halveLocked), within the request's budget.
func (l *Loader[A, V]) settleLocked(b *batch[A, V], m map[string]V, err error) {
	now := l.opts.Now()
	panicked := errors.Is(err, ErrPanicked)
	isolable := err != nil && !panicked && errors.Is(err, ErrIsolate)
	suspect := err != nil && !panicked && !isolable && errors.Is(err, ErrSuspect)
	answered := err == nil || isolable // the upstream answered, about the ids
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
		l.answerLocked(b, m, now)
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

// answerLocked gives each id of b its value. A one-id retry or quarantined
// call whose value the upstream refused quarantines the id; one answered
// releases it.
func (l *Loader[A, V]) answerLocked(b *batch[A, V], m map[string]V, now time.Time) {
	for i, r := range b.res {
		r.v, r.found = m[b.ids[i]]
		close(r.done)
	}
	if len(b.ids) != 1 || !b.retry && !b.alone {
		return
	}
	if r := b.res[0]; r.found && l.opts.Refused != nil && l.opts.Refused(r.v) {
		l.quarantineLocked(b.ids[0], now)
	} else if b.alone {
		l.q.release(b.ids[0])
		if l.opts.OnQuarantine != nil {
			l.opts.OnQuarantine(l.q.size())
		}
	}
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

func failLocked[V any](res []*result[V], err error) {
	for _, r := range res {
		r.err = err
		close(r.done)
	}
}

// failBudgetLocked fails ids whose client request has no call left.
func (l *Loader[A, V]) failBudgetLocked(res []*result[V], err error) {
	failLocked(res, fmt.Errorf("%w: %w", ErrBudget, err))
	if l.opts.OnBudget != nil {
		l.opts.OnBudget(len(res))
	}
}

// partitionLocked queues, ahead of newer batches, one retry per client
// request waiting on the failed shared call b, holding that request's ids.
// Each id goes to one owner: a one-id request waiting on it (the id then
// goes alone, the one retry such a request may cause), else the list
// request with the fewest ids in b, so a victim's id never rides with an
// attacker's list. A list request pays one call of its budget; one without
// calls left has its ids failed. If b held one request's ids only, they are
// halved instead (with halve; else they fail). The retries of a suspect
// failure form a round: if none is answered, the upstream is judged down.
func (l *Loader[A, V]) partitionLocked(b *batch[A, V], err error, suspect, halve bool) {
	type part struct {
		owner *Requester
		ids   []string
		res   []*result[V]
	}
	counts := make(map[*Requester]int)
	for _, r := range b.res {
		for _, q := range r.reqs {
			counts[q]++
		}
	}
	var parts []*part
	byOwner := make(map[*Requester]*part)
	for i, r := range b.res {
		if r.solo || len(r.reqs) == 0 {
			parts = append(parts, &part{ids: b.ids[i : i+1 : i+1], res: b.res[i : i+1 : i+1]})
			continue
		}
		o := r.reqs[0]
		for _, q := range r.reqs[1:] {
			if counts[q] < counts[o] {
				o = q
			}
		}
		p := byOwner[o]
		if p == nil {
			p = &part{owner: o}
			byOwner[o] = p
			parts = append(parts, p)
		}
		p.ids, p.res = append(p.ids, b.ids[i]), append(p.res, r)
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
	for _, p := range parts {
		if p.owner != nil && !p.owner.afford(1) {
			l.failBudgetLocked(p.res, err)
			continue
		}
		next = append(next, &batch[A, V]{g: b.g, arg: b.arg, ctx: b.ctx, ids: p.ids, res: p.res, retry: true, owner: p.owner, round: rd})
	}
	if rd != nil {
		rd.pending = len(next)
	}
	l.wg.Add(len(next))
	b.g.ready = append(next, b.g.ready...)
}

// halveLocked queues, ahead of newer batches, the two halves of b, a
// failed call of one list request's ids, if the request has two calls
// left; else its ids fail.
func (l *Loader[A, V]) halveLocked(b *batch[A, V], err error) {
	o := b.owner
	if o == nil || !o.afford(2) {
		l.failBudgetLocked(b.res, err)
		return
	}
	mid := len(b.ids) / 2
	h1 := &batch[A, V]{g: b.g, arg: b.arg, ctx: b.ctx, ids: b.ids[:mid], res: b.res[:mid], retry: true, owner: o}
	h2 := &batch[A, V]{g: b.g, arg: b.arg, ctx: b.ctx, ids: b.ids[mid:], res: b.res[mid:], retry: true, owner: o}
	l.wg.Add(2)
	b.g.ready = append([]*batch[A, V]{h1, h2}, b.g.ready...)
}
