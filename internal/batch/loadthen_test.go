package batch

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// told is one LoadThen outcome.
type told struct {
	v     string
	found bool
	err   error
}

// LoadThen waiters share a batch with Load waiters, one id's waiters of
// both kinds share its result, each then is told once, and a then that
// panics neither takes the process down nor keeps the others from their
// answers.
func TestLoadThenSharesBatchWithLoad(t *testing.T) {
	rec := &recorder{hold: make(chan struct{})}
	l := New(Options{MaxSize: 2, MaxWait: never}, rec.fetch)
	defer l.Close()
	ctx := context.Background()
	first, second := make(chan told, 2), make(chan told, 2)
	var panicked atomic.Int64
	l.LoadThen(ctx, nil, "g", "arg", "a", func(v string, found bool, err error) {
		panicked.Add(1)
		panic("boom")
	})
	l.LoadThen(ctx, nil, "g", "arg", "a", func(v string, found bool, err error) { first <- told{v, found, err} })
	var joined atomic.Int64
	loadA := make(chan told, 1)
	go func() {
		v, found, err := l.Load(joinCtx{ctx, &joined}, "g", "arg", "a")
		loadA <- told{v, found, err}
	}()
	waitFor(t, "the Load of a to join", func() bool { return joined.Load() == 1 })
	l.LoadThen(ctx, nil, "g", "arg", "b", func(v string, found bool, err error) { second <- told{v, found, err} })
	close(rec.hold)
	for name, got := range map[string]told{"LoadThen a": recv(t, first), "Load a": recv(t, loadA)} {
		if got != (told{"v:a", true, nil}) {
			t.Errorf("%s: %+v, want v:a", name, got)
		}
	}
	if got := recv(t, second); got != (told{"v:b", true, nil}) {
		t.Errorf("LoadThen b: %+v, want v:b", got)
	}
	l.Close() // waits for the batch's run, tells included
	if n := panicked.Load(); n != 1 {
		t.Errorf("the panicking then ran %d times, want 1", n)
	}
	if len(first)+len(second) != 0 {
		t.Error("a then was told twice")
	}
	if calls, _ := rec.snapshot(); len(calls) != 1 || len(calls[0]) != 2 {
		t.Errorf("calls %v, want one of a and b", calls)
	}
}

// A LoadThen settled at once — an ended ctx, a closed loader, a list
// request with no call left — is told before LoadThen returns.
func TestLoadThenSettledAtOnce(t *testing.T) {
	rec := &recorder{hold: make(chan struct{})}
	l := New(Options{MaxSize: 1, MaxWait: never}, rec.fetch)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	var got told
	tell := func(v string, found bool, err error) { got = told{v, found, err} }
	l.LoadThen(cancelled, nil, "g", "arg", "a", tell)
	if !errors.Is(got.err, context.Canceled) {
		t.Errorf("ended ctx: %+v, want context.Canceled", got)
	}

	// Budget(1) is 2: a one-id list may cause its own call and one more.
	req := l.Requester(1)
	pending := make(chan told, 2)
	for _, id := range []string{"x", "y"} {
		l.LoadThen(context.Background(), req, "g", "arg", id, func(v string, found bool, err error) { pending <- told{v, found, err} })
	}
	got = told{}
	l.LoadThen(context.Background(), req, "g", "arg", "z", tell)
	if !errors.Is(got.err, ErrBudget) {
		t.Errorf("third call of a one-id list: %+v, want ErrBudget", got)
	}
	close(rec.hold)
	for range 2 {
		if p := recv(t, pending); p.err != nil || !p.found {
			t.Errorf("id within the budget: %+v", p)
		}
	}

	l.Close()
	got = told{}
	l.LoadThen(context.Background(), nil, "g", "arg", "a", tell)
	if !errors.Is(got.err, ErrClosed) {
		t.Errorf("closed loader: %+v, want ErrClosed", got)
	}
}

// slotWaiter is a LoadTo caller's memory: its waiter and its slot.
type slotWaiter struct {
	slot Slot[string]
	got  chan told
}

func (w *slotWaiter) Loaded(v string, found bool, err error) { w.got <- told{v, found, err} }

// A LoadTo keeps the result of an id it adds to a batch in its slot, and
// only then: a load of an id already waiting shares that result and
// leaves its own slot unused, a used slot is not used again, and every
// waiter is told its id's outcome once; only the load that opens the
// batch makes its arg.
func TestLoadToSlot(t *testing.T) {
	rec := &recorder{hold: make(chan struct{})}
	l := New(Options{MaxSize: 3, MaxWait: never}, rec.fetch)
	defer l.Close()
	ctx := context.Background()
	// arg is made only for the load that opens the batch: once for a,
	// b and c.
	args := 0
	arg := func() string { args++; return "arg" }
	first := &slotWaiter{got: make(chan told, 2)}
	joiner := &slotWaiter{got: make(chan told, 2)}
	l.LoadTo(ctx, nil, "g", arg, "a", first, &first.slot)
	l.LoadTo(ctx, nil, "g", arg, "a", joiner, &joiner.slot)
	if !first.slot.used || joiner.slot.used {
		t.Errorf("slots used: first %v, joiner %v; want the first's only", first.slot.used, joiner.slot.used)
	}
	// first's slot, used, is given again for another id: that id's
	// result is allocated, not made over a's.
	again := &slotWaiter{got: make(chan told, 2)}
	l.LoadTo(ctx, nil, "g", arg, "b", again, &first.slot)
	l.LoadTo(ctx, nil, "g", arg, "c", thenFunc[string](func(v string, found bool, err error) {}), nil)
	close(rec.hold)
	for name, w := range map[string]*slotWaiter{"first a": first, "joiner a": joiner} {
		if got := recv(t, w.got); got != (told{"v:a", true, nil}) {
			t.Errorf("%s: %+v, want v:a", name, got)
		}
	}
	if got := recv(t, again.got); got != (told{"v:b", true, nil}) {
		t.Errorf("b in a used slot: %+v, want v:b", got)
	}
	l.Close()
	if len(first.got)+len(joiner.got)+len(again.got) != 0 {
		t.Error("a waiter was told twice")
	}
	if calls, _ := rec.snapshot(); len(calls) != 1 || len(calls[0]) != 3 {
		t.Errorf("calls %v, want one of a, b and c", calls)
	}
	if args != 1 {
		t.Errorf("arg made %d times, want once, for the batch's opener", args)
	}
}
