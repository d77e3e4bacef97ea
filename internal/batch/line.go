package batch

import "slices"

// The loader's own bounds (Options.MaxInFlightAll, MaxQueuedAll) hold
// across groups: what the upstream carries and what the loader holds do
// not grow with the groups a client makes by varying what it forwards.
// Groups that have a batch to send but find no slot of the loader's free
// wait in a line, and take the slots freed in turn, one call each, as
// NGINX's upstream queue hands a freed connection to the oldest waiter.
// The calls a caller makes outside the batches (Own) take the same slots
// and wait in the same line.

// inLine is one place in the loader's line: a group with a batch to
// send, or a caller's own call (Own). Exactly one is set.
type inLine[A, V any] struct {
	g   *group[A, V]
	own *ownCall
}

// slotLocked reports whether g may start a call as far as the loader's
// bound goes: a slot is free and no one (group or own call) waits for one. When not,
// g joins the line if it has a batch to send (sendableLocked); it is
// given a slot as one frees (grantLocked). l.mu must be held.
func (l *Loader[A, V]) slotLocked(g *group[A, V]) bool {
	if l.opts.MaxInFlightAll <= 0 || l.inFlight < l.opts.MaxInFlightAll && len(l.waiting) == 0 {
		return true
	}
	if !g.waiting && l.sendableLocked(g) {
		g.waiting = true
		l.waiting = append(l.waiting, inLine[A, V]{g: g})
	}
	return false
}

// sendableLocked reports whether g has a batch takeLocked would take: a
// ready one, or the open one once it may leave. l.mu must be held.
func (l *Loader[A, V]) sendableLocked(g *group[A, V]) bool {
	if len(g.ready) > 0 {
		return true
	}
	l.windowLocked(g)
	b := g.open
	return b != nil && (l.closed || b.expired && g.inFlight == 0)
}

// grantLocked gives a slot freed to the first group in line, dispatching
// one batch of it, which it returns, to be run; the group goes to the
// back of the line if it has more to send. nil: no slot free, or no
// group waits. A group in line whose batches were dropped meanwhile
// (deadline, abandoned) is passed over; an own call ahead of it is given
// its slot (Own), and the next in line is looked at. l.mu must be held.
func (l *Loader[A, V]) grantLocked() *batch[A, V] {
	for len(l.waiting) > 0 && l.inFlight < l.opts.MaxInFlightAll {
		w := l.waiting[0]
		l.waiting[0] = inLine[A, V]{}
		l.waiting = l.waiting[1:]
		if w.own != nil {
			l.inFlight++
			close(w.own.granted)
			continue
		}
		g := w.g
		g.waiting = false
		if l.groups.get(g.key) != g {
			// A group of ids fetched alone, whose waiters' leaving
			// (leave) could not find it to drop its batch.
			l.dropAbandonedLocked(g)
		}
		b := l.dispatchLocked(g)
		if b == nil {
			l.idleLocked(g)
			continue
		}
		if int(g.inFlight) < l.opts.MaxInFlight && l.sendableLocked(g) {
			g.waiting = true
			l.waiting = append(l.waiting, inLine[A, V]{g: g})
		}
		return b
	}
	if len(l.waiting) == 0 {
		l.waiting = l.waiting[:0:0] // let the line's array go once drained
	}
	return nil
}

// leaveLineLocked takes g, idle, out of the line. l.mu must be held.
func (l *Loader[A, V]) leaveLineLocked(g *group[A, V]) {
	if g.waiting {
		g.waiting = false
		if i := slices.IndexFunc(l.waiting, func(w inLine[A, V]) bool { return w.g == g }); i >= 0 {
			l.waiting = slices.Delete(l.waiting, i, i+1)
		}
	}
}

// lateLineLocked fails the late batches of the groups in line
// (lateLocked), and returns the results whose LoadThen waiters are to be
// told: a group in line with no call of its own in flight has no return
// of its own to check them at, and it may wait behind many groups' calls.
// l.mu must be held.
func (l *Loader[A, V]) lateLineLocked() (tell []*result[V]) {
	if l.opts.Deadline == nil || len(l.waiting) == 0 {
		return nil
	}
	for _, w := range slices.Clone(l.waiting) {
		if w.g == nil {
			continue // an own call: Own bounds its wait
		}
		tell = append(tell, l.lateLocked(w.g)...)
		l.idleLocked(w.g)
	}
	return tell
}

// queueLocked counts n ids queued in g (n < 0: leaving its queue), listed
// of them lists' (batch.listed), retried of those in lists' isolation
// retries, for both g's bound and the loader's. l.mu must be held.
func (l *Loader[A, V]) queueLocked(g *group[A, V], n, listed, retried int) {
	g.queued += int32(n)
	g.listed += int32(listed)
	g.retried += int32(retried)
	l.queued += n
	l.listed += listed
	l.retried += retried
}

// unqueueLocked counts b, queued in g, leaving g's queue. l.mu must be
// held.
func (l *Loader[A, V]) unqueueLocked(g *group[A, V], b *batch[A, V]) {
	retried := 0
	if b.retry {
		retried = int(b.listed)
	}
	l.queueLocked(g, -len(b.ids), -int(b.listed), -retried)
}

// fullAllLocked reports whether n more ids, a list's or a one-id miss's,
// would take the loader past MaxQueuedAll (over: lists' ids within their
// share of it, as in a group). A loader with nothing queued takes any
// one request. l.mu must be held.
func (l *Loader[A, V]) fullAllLocked(n int, list bool) bool {
	return l.opts.MaxQueuedAll > 0 && l.queued > 0 && over(l.queued, l.listed, l.retried, l.opts.MaxQueuedAll, n, list)
}
