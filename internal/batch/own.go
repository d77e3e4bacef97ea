package batch

import (
	"context"
	"slices"
	"time"
)

// A caller may make a bulk call outside the loader's batches: the proxy
// asks again, with a request's own headers, for ids whose batched answer
// was made for another request (private, or a variant the request did
// not ask for), and those calls go to the same bulk endpoint. Unbounded,
// a batch of n members whose answer was private sent n−1 such calls at
// once, past MaxInFlightAll, whatever the route's bound said. Own makes
// them take the loader's slots, in its line, as a group's call does.

// ownCall is one Own call in the loader's line. granted is closed, under
// Loader.mu, when grantLocked gives it a slot.
type ownCall struct{ granted chan struct{} }

// Own makes call, a call of ids ids to the upstream its caller makes
// outside the loader's batches, within MaxInFlightAll: at once when a
// slot is free and no one waits in line, else once the line gives it
// one. Its wait ends with ctx or, past Options.Deadline, with
// ErrDeadline (told to OnDrop), call not made; the error is then the
// wait's, nil otherwise.
//
// The caller must hold no slot of the loader while it calls Own (it
// must not be in a fetch): a call waiting in line while holding one
// could wait for itself. The proxy's own calls come after the batched
// answer they replace has returned, on the request's goroutine.
func (l *Loader[A, V]) Own(ctx context.Context, ids int, call func()) error {
	l.mu.Lock()
	if l.opts.MaxInFlightAll <= 0 {
		l.mu.Unlock()
		call()
		return nil
	}
	if l.inFlight < l.opts.MaxInFlightAll && len(l.waiting) == 0 {
		l.inFlight++
		l.mu.Unlock()
	} else {
		o := &ownCall{granted: make(chan struct{})}
		l.waiting = append(l.waiting, inLine[A, V]{own: o})
		l.mu.Unlock()
		if err := l.waitOwn(ctx, o, ids); err != nil {
			return err
		}
	}
	defer l.ownDone()
	call()
	return nil
}

// waitOwn waits for o's slot. On ctx's end or the deadline it leaves the
// line, or gives back the slot granted meanwhile.
func (l *Loader[A, V]) waitOwn(ctx context.Context, o *ownCall, ids int) error {
	var late <-chan time.Time
	if l.opts.Deadline != nil {
		t := time.NewTimer(l.opts.Deadline())
		defer t.Stop()
		late = t.C
	}
	var err error
	select {
	case <-o.granted:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-late:
		err = ErrDeadline
	}
	l.mu.Lock()
	select {
	case <-o.granted:
		l.mu.Unlock()
		l.ownDone()
	default:
		if i := slices.IndexFunc(l.waiting, func(w inLine[A, V]) bool { return w.own == o }); i >= 0 {
			l.waiting = slices.Delete(l.waiting, i, i+1)
		}
		l.mu.Unlock()
	}
	if err == ErrDeadline && l.opts.OnDrop != nil {
		l.opts.OnDrop(ErrDeadline, ids)
	}
	return err
}

// ownDone gives back an own call's slot, to the line first.
func (l *Loader[A, V]) ownDone() {
	var run []*batch[A, V]
	l.mu.Lock()
	l.inFlight--
	for b := l.grantLocked(); b != nil; b = l.grantLocked() {
		run = append(run, b)
	}
	l.mu.Unlock()
	for _, b := range run {
		go l.run(b)
	}
}

// InLine is the number of groups and own calls waiting in the loader's
// line for a slot, so that a caller, a test above all, can see a call
// wait without timing it.
func (l *Loader[A, V]) InLine() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiting)
}
