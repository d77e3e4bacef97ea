package batch

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
)

// groupsLeft is the number of groups l holds state for.
func groupsLeft(l *Loader[string, string]) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.groups.len()
}

// TestIdleGroupMadeAgain: a group that went idle is made again into the
// next new group (Loader.spare), its map and timer kept; the new group
// shares nothing else with it: another group's loads of the same id are
// fetched with their own arg, in a call of their own, and the first
// group's loads after it are fetched anew, not joined to an answered
// result.
func TestIdleGroupMadeAgain(t *testing.T) {
	var rec recorder
	l := New(Options{MaxSize: 2, MaxWait: never}, rec.fetch)
	defer l.Close()
	out := make(chan outcome, 2)
	for i, step := range []struct{ group, arg, other string }{{"a", "A", "y"}, {"b", "B", "z"}, {"a", "A", "w"}} {
		go load(l, context.Background(), step.group, step.arg, "x", out)
		go load(l, context.Background(), step.group, step.arg, step.other, out)
		for range 2 {
			if o := recv(t, out); o.err != nil || !o.found || o.v != "v:"+o.id {
				t.Fatalf("step %d: load %s got (%q, %v, %v)", i, o.id, o.v, o.found, o.err)
			}
		}
		waitFor(t, "the group to go idle", func() bool { return groupsLeft(l) == 0 })
	}
	calls, args := rec.snapshot()
	want := [][]string{{"x", "y"}, {"x", "z"}, {"w", "x"}}
	for i := range calls {
		slices.Sort(calls[i])
	}
	if !slices.EqualFunc(calls, want, slices.Equal) || !slices.Equal(args, []string{"A", "B", "A"}) {
		t.Errorf("calls %q with args %q, want %q with A, B, A", calls, args, want)
	}
}

// TestStaleTimerRunKeepsWindow: a run of a group's timer set for a batch
// closed since (its Stop came too late) must not end the window of the
// batch open now, whose MaxWait is not up.
func TestStaleTimerRunKeepsWindow(t *testing.T) {
	var rec recorder
	var joined atomic.Int64
	l := New(Options{MaxSize: 10, MaxWait: never}, rec.fetch)
	out := make(chan outcome, 1)
	go load(l, joinCtx{context.Background(), &joined}, "g", "", "a", out)
	waitFor(t, "a to join", func() bool { return joined.Load() == 1 })
	l.mu.Lock()
	g := l.groups.get(keyOf("g"))
	l.mu.Unlock()
	l.timeUp(g) // as a late run of the timer of a batch closed before
	l.mu.Lock()
	open, expired := g.open != nil, g.open != nil && g.open.expired
	l.mu.Unlock()
	if calls, _ := rec.snapshot(); !open || expired || len(calls) != 0 {
		t.Errorf("after a stale timer run: open %v, expired %v, calls %q; want the batch open, waiting", open, expired, calls)
	}
	l.Close()
	if o := recv(t, out); o.err != nil || !o.found {
		t.Errorf("load a after Close: %+v", o)
	}
}
