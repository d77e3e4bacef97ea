package batch

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestOwnTakesTurnsInLine: a call made outside the batches (Own) takes a
// slot of MaxInFlightAll as a group's call does: with the only slot held
// by a batch, it waits in the line, behind the group already there and
// ahead of the one that came after it, and runs once the slot is its;
// no more than one call is ever in flight.
func TestOwnTakesTurnsInLine(t *testing.T) {
	f := newGateFetch()
	l := New(Options{MaxSize: 1, MaxWait: never, MaxInFlight: 1, MaxInFlightAll: 1}, f.fetch)
	defer l.Close()
	defer close(f.release)

	out := make(chan outcome, 3)
	go load(l, context.Background(), "a", "a", "a1", out)
	waitFor(t, "a's call", func() bool { return f.calls.Load() == 1 })
	go load(l, context.Background(), "b", "b", "b1", out)
	waitFor(t, "b in line", func() bool { return l.InLine() == 1 })
	owned := make(chan error, 1)
	go func() {
		owned <- l.Own(context.Background(), 1, func() {
			_, _ = f.fetch(context.Background(), "own", []string{"o1"})
		})
	}()
	waitFor(t, "the own call in line", func() bool { return l.InLine() == 2 })
	go load(l, context.Background(), "c", "c", "c1", out)
	waitFor(t, "c in line", func() bool { return l.InLine() == 3 })
	for range 4 {
		f.release <- struct{}{}
	}
	if err := <-owned; err != nil {
		t.Fatalf("Own: %v", err)
	}
	for range 3 {
		if o := <-out; o.err != nil {
			t.Errorf("%s: %v", o.id, o.err)
		}
	}
	if got, want := f.started(), []string{"a", "b", "own", "c"}; !slices.Equal(got, want) {
		t.Errorf("calls started %v, want %v (the line's order)", got, want)
	}
	if h := f.high.Load(); h != 1 {
		t.Errorf("%d calls in flight at once, bound 1", h)
	}
}

// TestOwnLeavesLine: an own call whose wait ends (its context, or the
// loader's Deadline: ErrDeadline, told to OnDrop) makes no call and holds
// no slot: the batch behind it in line is the next to run.
func TestOwnLeavesLine(t *testing.T) {
	var mu sync.Mutex
	dropped := map[error]int{}
	f := newGateFetch()
	deadline := never
	l := New(Options{MaxSize: 1, MaxWait: never, MaxInFlight: 1, MaxInFlightAll: 1,
		Deadline: func() time.Duration { mu.Lock(); defer mu.Unlock(); return deadline },
		OnDrop:   func(err error, ids int) { mu.Lock(); dropped[err] += ids; mu.Unlock() }}, f.fetch)
	defer l.Close()
	defer close(f.release)

	out := make(chan outcome, 2)
	go load(l, context.Background(), "a", "a", "a1", out)
	waitFor(t, "a's call", func() bool { return f.calls.Load() == 1 })

	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() { gone <- l.Own(ctx, 1, func() { t.Error("a cancelled own call was made") }) }()
	waitFor(t, "the own call in line", func() bool { return l.InLine() == 1 })
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Own: %v, want context.Canceled", err)
	}
	mu.Lock()
	deadline = time.Millisecond
	mu.Unlock()
	if err := l.Own(context.Background(), 3, func() { t.Error("a late own call was made") }); !errors.Is(err, ErrDeadline) {
		t.Errorf("late Own: %v, want ErrDeadline", err)
	}
	mu.Lock()
	if dropped[ErrDeadline] != 3 {
		t.Errorf("OnDrop told %v, want 3 ids past the deadline", dropped)
	}
	deadline = never
	mu.Unlock()
	if n := l.InLine(); n != 0 {
		t.Fatalf("%d in line after both left", n)
	}
	go load(l, context.Background(), "b", "b", "b1", out)
	waitFor(t, "b in line", func() bool { return l.InLine() == 1 })
	f.release <- struct{}{} // a's call returns: its slot is b's
	f.release <- struct{}{}
	for range 2 {
		if o := <-out; o.err != nil {
			t.Errorf("%s: %v", o.id, o.err)
		}
	}
}
