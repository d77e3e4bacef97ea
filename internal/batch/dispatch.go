package batch

import (
	"fmt"
	"runtime/debug"
	"slices"
	"time"
)

// expire marks b's MaxWait as up, if b still accepts ids.
func (l *Loader[A, V]) expire(b *batch[A, V]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expireLocked(b)
}

func (l *Loader[A, V]) expireLocked(b *batch[A, V]) {
	if b.g.open == b {
		b.expired = true
		l.pumpLocked(b.g)
	}
}

// timeUp is g's timer (group.timer): it expires g's open batch if that
// batch's MaxWait is up. A run of the timer set for a batch closed since
// (Stop came too late) finds another batch open, opened less than MaxWait
// ago, whose own run is still to come (Reset), or none, and does nothing.
// The timer fires no sooner than MaxWait after the Reset that follows the
// batch's opened on the same monotonic clock, or than what was left of it
// after a later clock read (windowLocked), so its own run never misses.
func (l *Loader[A, V]) timeUp(g *group[A, V]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g.armed = false
	if b := g.open; b != nil && time.Since(b.opened) >= l.opts.MaxWait {
		l.expireLocked(b)
	}
}

// armLocked sets g's timer to run timeUp in d. l.mu must be held.
func (l *Loader[A, V]) armLocked(g *group[A, V], d time.Duration) {
	g.armed = true
	if g.timer == nil {
		g.timer = time.AfterFunc(d, func() { l.timeUp(g) })
	} else {
		g.timer.Reset(d)
	}
}

// windowLocked settles the MaxWait of g's open batch, whose timer is not
// set, once g has nothing in flight (nextLocked): the open batch can leave
// only then, so no timer is set for it while a call is in flight
// (joinLocked) — one that fired then only marked it expired, and woke an
// idle process for that (bench/miss-vs-hit.sh: about one timer wake per
// bulk call, the calls following each other). Now: expired when MaxWait is
// up, otherwise the timer for what is left, so the batch leaves when it
// would have. l.mu must be held.
func (l *Loader[A, V]) windowLocked(g *group[A, V]) {
	b := g.open
	if b == nil || b.expired || g.armed || b.opened.IsZero() || g.inFlight > 0 {
		return
	}
	if left := l.opts.MaxWait - time.Since(b.opened); left > 0 {
		l.armLocked(g, left)
	} else {
		b.expired = true
	}
}

// closeOpenLocked queues g's open batch behind the ready ones. l.mu must be
// held.
func (l *Loader[A, V]) closeOpenLocked(g *group[A, V]) {
	b := l.shutLocked(g)
	g.last = len(b.ids)
	g.ready = append(g.ready, b)
}

// shutLocked takes g's open batch out of g, closed to ids, and returns it.
// l.mu must be held.
func (l *Loader[A, V]) shutLocked(g *group[A, V]) *batch[A, V] {
	b := g.open
	g.open = nil
	if g.armed {
		g.armed = false
		g.timer.Stop()
	}
	return b
}

// pumpLocked starts g's fetches while it has slots, each on a goroutine
// of its own: ready batches first, then the open batch if its MaxWait is
// up and g has nothing in flight (or the loader is closing), a batch of a
// one-id request's id going ahead of the ready ones every other time
// (jumpLocked); see nextLocked. l.mu must be held.
func (l *Loader[A, V]) pumpLocked(g *group[A, V]) {
	for b := l.nextLocked(g); b != nil; b = l.nextLocked(g) {
		go l.run(b)
	}
}

// nextLocked dispatches the batch of g to fetch next, if g has a slot
// for it and the loader one (slotLocked: else g waits in line for it),
// and returns it, to be run; nil: none. l.mu must be held.
func (l *Loader[A, V]) nextLocked(g *group[A, V]) *batch[A, V] {
	if int(g.inFlight) >= l.opts.MaxInFlight || !l.slotLocked(g) {
		return nil
	}
	return l.dispatchLocked(g)
}

// dispatchLocked is nextLocked once the loader's slot is g's. l.mu must
// be held.
func (l *Loader[A, V]) dispatchLocked(g *group[A, V]) *batch[A, V] {
	for int(g.inFlight) < l.opts.MaxInFlight {
		b := l.takeLocked(g)
		if b == nil {
			return nil
		}
		l.unqueueLocked(g, b)
		if !l.unsettledLocked(b) {
			continue
		}
		for i, id := range b.ids {
			if g.pending[id] == b.res[i] {
				delete(g.pending, id)
			}
		}
		g.inFlight++
		l.inFlight++
		return b
	}
	return nil
}

// takeLocked takes out of g the batch to send next, if any: the one
// jumpLocked picks, else the first ready one, else the open one once it
// may leave. l.mu must be held.
func (l *Loader[A, V]) takeLocked(g *group[A, V]) *batch[A, V] {
	if len(g.ready) == 0 {
		l.windowLocked(g)
		if b := g.open; b == nil || !l.closed && !(b.expired && g.inFlight == 0) {
			return nil
		}
		l.closeOpenLocked(g)
	} else if b := l.jumpLocked(g); b != nil {
		return b
	}
	g.jumped = false
	b := g.ready[0]
	g.ready[0] = nil
	if len(g.ready) == 1 {
		g.ready = g.ready[:0] // its room kept for the next batch
	} else {
		g.ready = g.ready[1:]
	}
	return b
}

// jumpLocked takes out of g, when the last batch g sent went in turn, the
// oldest batch holding a one-id request's id (solo) that is not first in
// line: a queued one, else the open one once its MaxWait is up (dueLocked),
// and returns it; nil: the first ready batch goes. A list's Enlist queues
// ⌈n/MaxSize⌉ full batches at once, and one-id misses queued behind them
// waited for all of them (or failed at their Deadline); they now wait
// about one call, and the list's batches still go every other call. The
// open batch cut short this way leaves g.last as it was: its size says
// nothing of the traffic's. l.mu must be held; g.ready is not empty.
func (l *Loader[A, V]) jumpLocked(g *group[A, V]) *batch[A, V] {
	if g.jumped || g.ready[0].solo {
		return nil
	}
	for i, b := range g.ready[1:] {
		if b.solo {
			g.ready = slices.Delete(g.ready, i+1, i+2)
			g.jumped = true
			return b
		}
	}
	if b := g.open; b != nil && b.solo && l.dueLocked(b) {
		g.jumped = true
		return l.shutLocked(g)
	}
	return nil
}

// dueLocked reports whether the open batch b may leave ahead of the ready
// ones: its MaxWait is up (read here: no timer is set while a call is in
// flight), or the loader is closing. l.mu must be held.
func (l *Loader[A, V]) dueLocked(b *batch[A, V]) bool {
	return b.expired || l.closed || !b.opened.IsZero() && time.Since(b.opened) >= l.opts.MaxWait
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
	l.settleLocked(b, answers[V]{}, nil) // its round, if any, counts it answered
	l.wg.Done()
	return false
}

// run makes b's fetch, then answers its ids or queues their retries, and
// tells the LoadThen waiters of the ids it settled. The first batch its
// call's return lets go (a busy group's next batch, which waited for it)
// it then runs itself, and so on: a busy group's calls cost no goroutine
// each, nor the stack growth of each new goroutine to the fetch's depth.
func (l *Loader[A, V]) run(b *batch[A, V]) {
	for b != nil {
		b = l.runOne(b)
	}
}

// runOne is run for one batch; it returns the next batch to run, already
// dispatched (nextLocked), or nil.
func (l *Loader[A, V]) runOne(b *batch[A, V]) (next *batch[A, V]) {
	defer l.wg.Done()
	a, err := l.call(b)

	l.mu.Lock()
	g := b.g
	g.inFlight--
	l.inFlight--
	l.settleLocked(b, a, err)
	tell := tellLocked(b.res)
	late := l.lateLocked(g)
	if len(l.waiting) > 0 {
		late = append(late, l.lateLineLocked()...)
	}
	next = l.nextLocked(g)
	l.pumpLocked(g)
	// The slots g left are the line's, first come first served.
	for w := l.grantLocked(); w != nil; w = l.grantLocked() {
		if next == nil {
			next = w
		} else {
			go l.run(w)
		}
	}
	if l.idleLocked(g) {
		l.spare = g
	}
	l.mu.Unlock()
	for _, r := range tell {
		r.tell()
	}
	for _, r := range late {
		r.tell()
	}
	return next
}

// idleLocked forgets g if it holds nothing (no batch open, queued or in
// flight) and is registered, and reports whether it did. l.mu must be
// held.
func (l *Loader[A, V]) idleLocked(g *group[A, V]) bool {
	if g.open != nil || len(g.ready) > 0 || g.inFlight > 0 {
		return false
	}
	l.leaveLineLocked(g)
	if l.groups.get(g.key) == g {
		l.groups.del(g.key)
		return true
	}
	return false
}

// lateLocked fails, without a call, g's batches not sent within
// Options.Deadline of their opening (read now: a new deadline applies to
// the batches already queued), and returns their results whose LoadThen
// waiters are to be told once the lock is released. It runs as each of
// g's calls returns: a batch waits only behind calls in flight. l.mu must
// be held.
func (l *Loader[A, V]) lateLocked(g *group[A, V]) (tell []*result[V]) {
	if l.opts.Deadline == nil || len(g.ready) == 0 && g.open == nil {
		return nil
	}
	now, d := time.Now(), l.opts.Deadline()
	late := func(b *batch[A, V]) bool { return !b.opened.IsZero() && now.Sub(b.opened) > d }
	for _, b := range l.removeLocked(g, late) {
		l.dropLocked(g, b, ErrDeadline)
		tell = append(tell, tellLocked(b.res)...)
	}
	return tell
}

// dropAbandonedLocked drops, without a call, g's batches not yet sent
// whose every id nobody waits on any more (result.abandoned): their
// clients left, and a call would answer no one. A nil g holds none. l.mu
// must be held.
func (l *Loader[A, V]) dropAbandonedLocked(g *group[A, V]) {
	if g == nil {
		return
	}
	gone := func(b *batch[A, V]) bool {
		for _, r := range b.res {
			if !r.abandoned() && !r.settled {
				return false
			}
		}
		return true
	}
	for _, b := range l.removeLocked(g, gone) {
		l.dropLocked(g, b, ErrAbandoned)
	}
	l.idleLocked(g)
}

// removeLocked takes out of g the batches not yet sent (queued, and the
// open one) for which drop is true, and returns them. l.mu must be held.
func (l *Loader[A, V]) removeLocked(g *group[A, V], drop func(*batch[A, V]) bool) (out []*batch[A, V]) {
	kept := g.ready[:0]
	for _, b := range g.ready {
		if drop(b) {
			out = append(out, b)
		} else {
			kept = append(kept, b)
		}
	}
	clear(g.ready[len(kept):])
	g.ready = kept
	if b := g.open; b != nil && drop(b) {
		out = append(out, l.shutLocked(g))
	}
	return out
}

// dropLocked ends b, taken out of g unsent: its ids leave the group's
// pending and queue, and its hold on their results is released with err
// (settleLocked: a result another call holds waits for that call), as a
// failed call's would be. l.mu must be held.
func (l *Loader[A, V]) dropLocked(g *group[A, V], b *batch[A, V], err error) {
	l.unqueueLocked(g, b)
	for i, id := range b.ids {
		if g.pending[id] == b.res[i] {
			delete(g.pending, id)
		}
	}
	if l.opts.OnDrop != nil {
		l.opts.OnDrop(err, len(b.ids))
	}
	l.settleLocked(b, answers[V]{}, err)
	l.wg.Done()
}

// tellLocked marks the results of res that are settled and have LoadThen
// waiters not yet told, and returns them, to be told once the lock is
// released. l.mu must be held. A call settles only results it holds, so
// its own res are where to look.
//
// When all of res are to be told, as when a call answered ids that each
// have a LoadThen waiter (the proxy's batched misses), res itself is
// returned, not a copy: a dispatched batch's res is never written again.
func tellLocked[V any](res []*result[V]) []*result[V] {
	n := 0
	for _, r := range res {
		if r.toTell() {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := res
	if n < len(res) {
		out = make([]*result[V], 0, n)
		for _, r := range res {
			if r.toTell() {
				out = append(out, r)
			}
		}
	}
	for _, r := range out {
		r.told = true
	}
	return out
}

// toTell reports whether r is settled and has LoadThen waiters not yet
// told. Loader.mu must be held.
func (r *result[V]) toTell() bool { return r.settled && !r.told && r.then != nil }

// tell gives r's outcome to its LoadThen waiters. r is settled, so
// nothing writes it any more.
func (r *result[V]) tell() {
	tellOne(r.then, r.v, r.found, r.err)
	for _, then := range r.thens {
		tellOne(then, r.v, r.found, r.err)
	}
}

// tellOne tells then, recovering a panic (see LoadThen).
func tellOne[V any](then Waiter[V], v V, found bool, err error) {
	defer func() { _ = recover() }()
	then.Loaded(v, found, err)
}

// call runs fetch, turning a panic into an error: every waiter of b gets
// it, and run still releases b's slot of its group. It runs on the
// loader's own goroutine (run), where nothing else would recover it.
func (l *Loader[A, V]) call(b *batch[A, V]) (a answers[V], err error) {
	defer func() {
		if r := recover(); r != nil {
			if l.opts.OnPanic == nil {
				a, err = answers[V]{}, fmt.Errorf("%w: %v\n\n%s", ErrPanicked, r, debug.Stack())
				return
			}
			l.opts.OnPanic(r, debug.Stack())
			a, err = answers[V]{}, fmt.Errorf("%w: %v", ErrPanicked, r)
		}
	}()
	if l.opts.OnBatch != nil {
		l.opts.OnBatch(len(b.ids))
	}
	if l.list != nil {
		a.list, err = l.list(b.ctx, b.arg, b.ids)
		if err == nil && len(a.list) != len(b.ids) {
			// A bug of the fetch's: never an id given another's value.
			a.list, err = nil, fmt.Errorf("batch: %d values for %d ids", len(a.list), len(b.ids))
		}
		return a, err
	}
	a.m, err = l.fetch(b.ctx, b.arg, b.ids)
	return a, err
}

// answers are a call's values: by id (FetchFunc), or in the order of its
// ids (ListFunc).
type answers[V any] struct {
	m    map[string]V
	list []V
}

// get is the value of b.ids[i], the i-th id of the call that answered.
func (a answers[V]) get(ids []string, i int) (v V, found bool) {
	if a.list != nil {
		return a.list[i], true
	}
	v, found = a.m[ids[i]]
	return v, found
}
