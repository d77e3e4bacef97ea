package batch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gateFetch is a fetch whose calls each wait for a token on release,
// recording the order in which calls started (by arg: the group) and the
// most calls in flight at once.
type gateFetch struct {
	release chan struct{}
	cur     atomic.Int64
	high    atomic.Int64
	calls   atomic.Int64
	mu      sync.Mutex
	order   []string
}

func newGateFetch() *gateFetch { return &gateFetch{release: make(chan struct{}, 1024)} }

func (f *gateFetch) fetch(_ context.Context, arg string, ids []string) (map[string]string, error) {
	n := f.cur.Add(1)
	for h := f.high.Load(); n > h && !f.high.CompareAndSwap(h, n); h = f.high.Load() {
	}
	f.mu.Lock()
	f.order = append(f.order, arg)
	f.mu.Unlock()
	f.calls.Add(1)
	<-f.release
	f.cur.Add(-1)
	m := make(map[string]string, len(ids))
	for _, id := range ids {
		m[id] = "v:" + id
	}
	return m, nil
}

func (f *gateFetch) started() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.order...)
}

// lineLen is the groups in the loader's line.
func lineLen(l *Loader[string, string]) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiting)
}

// TestMaxInFlightAllAcrossGroups: many groups, each allowed MaxInFlight
// calls, never hold more than MaxInFlightAll calls at once between them,
// and every load is still answered as slots free.
func TestMaxInFlightAllAcrossGroups(t *testing.T) {
	const groups, perGroup, all = 12, 3, 3
	f := newGateFetch()
	l := New(Options{MaxSize: 1, MaxWait: never, MaxInFlight: 2, MaxInFlightAll: all}, f.fetch)
	defer l.Close()
	defer close(f.release) // a failing test's calls return: Close waits for them

	out := make(chan outcome, groups*perGroup)
	for g := range groups {
		name := string(rune('a' + g))
		for i := range perGroup {
			go load(l, context.Background(), name, name, name+string(rune('0'+i)), out)
		}
	}
	waitFor(t, "the first calls", func() bool { return f.calls.Load() == all })
	waitFor(t, "every load queued", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.queued == groups*perGroup-all
	})
	for range groups * perGroup {
		f.release <- struct{}{}
	}
	for range groups * perGroup {
		if o := recv(t, out); o.err != nil || o.v != "v:"+o.id {
			t.Fatalf("load %s: %+v", o.id, o)
		}
	}
	if h := f.high.Load(); h != all {
		t.Fatalf("most calls in flight at once %d, want %d (MaxInFlightAll)", h, all)
	}
	if c := f.calls.Load(); c != groups*perGroup {
		t.Fatalf("%d calls, want %d", c, groups*perGroup)
	}
}

// TestLineTakesTurns: a group with a long queue does not keep another
// group's batch waiting behind it: the groups in line take the slots
// freed in turn, one call each.
func TestLineTakesTurns(t *testing.T) {
	f := newGateFetch()
	l := New(Options{MaxSize: 1, MaxWait: never, MaxInFlight: 2, MaxInFlightAll: 1}, f.fetch)
	defer l.Close()
	defer close(f.release) // a failing test's calls return: Close waits for them

	out := make(chan outcome, 16)
	for i := range 10 { // a's ten calls: one in flight, a in line
		go load(l, context.Background(), "a", "a", "a"+string(rune('0'+i)), out)
	}
	waitFor(t, "a's calls queued", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.queued == 9 && len(l.waiting) == 1
	})
	go load(l, context.Background(), "b", "b", "b0", out)
	waitFor(t, "b in line", func() bool { return lineLen(l) == 2 })
	go load(l, context.Background(), "c", "c", "c0", out)
	waitFor(t, "c in line", func() bool { return lineLen(l) == 3 })
	for range 12 {
		f.release <- struct{}{}
	}
	for range 12 {
		recv(t, out)
	}
	got := f.started()
	want := []string{"a", "a", "b", "c", "a"}
	for i, w := range want {
		if got[i] != w {
			t.Fatalf("calls started in order %v, want it to begin %v", got, want)
		}
	}
}

// TestMaxQueuedAllRefuses: the loader holds at most MaxQueuedAll ids not
// yet sent across groups, each group with room of its own to spare: a
// load past it is refused at once (ErrQueueFull, counted), and so is a
// list enlisting in a group that holds nothing.
func TestMaxQueuedAllRefuses(t *testing.T) {
	f := newGateFetch()
	var d drops
	l := New(Options{MaxSize: 1, MaxWait: never, MaxInFlight: 1, MaxInFlightAll: 1,
		MaxQueued: 100, MaxQueuedAll: 4, OnDrop: d.on}, f.fetch)
	defer l.Close()
	defer close(f.release) // a failing test's calls return: Close waits for them

	out := make(chan outcome, 16)
	go load(l, context.Background(), "g0", "g0", "x", out)
	waitFor(t, "the first call", func() bool { return f.calls.Load() == 1 })
	for g := 1; g <= 4; g++ {
		name := "g" + string(rune('0'+g))
		go load(l, context.Background(), name, name, "x", out)
		waitFor(t, name+" in line", func() bool { return lineLen(l) == g })
	}
	for g := 5; g <= 9; g++ {
		name := "g" + string(rune('0'+g))
		_, _, err := l.Load(context.Background(), name, name, "x")
		if !errors.Is(err, ErrQueueFull) {
			t.Fatalf("load in %s past MaxQueuedAll: err %v, want ErrQueueFull", name, err)
		}
	}
	req := l.Requester(2)
	if err := l.Enlist(context.Background(), req, "h", "h", []string{"p", "q"}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("Enlist in a new group past MaxQueuedAll: %v, want ErrQueueFull", err)
	}
	if n := d.get(ErrQueueFull); n != 7 {
		t.Fatalf("refused ids counted %d, want 7", n)
	}
	if n := func() int { l.mu.Lock(); defer l.mu.Unlock(); return l.groups.len() }(); n != 5 {
		t.Fatalf("%d groups registered, want 5 (a refused load leaves none)", n)
	}
	for range 5 {
		f.release <- struct{}{}
	}
	for range 5 {
		if o := recv(t, out); o.err != nil {
			t.Fatalf("admitted load: %v", o.err)
		}
	}
}

// TestLineDeadline: a batch waiting in line for a slot, with no call of
// its group's own in flight, is still failed at its deadline (as the
// calls in flight return), without a call.
func TestLineDeadline(t *testing.T) {
	f := newGateFetch()
	var d drops
	var late atomic.Bool
	deadline := func() time.Duration {
		if late.Load() {
			return -1
		}
		return never
	}
	l := New(Options{MaxSize: 1, MaxWait: never, MaxInFlight: 1, MaxInFlightAll: 1,
		Deadline: deadline, OnDrop: d.on}, f.fetch)
	defer l.Close()
	defer close(f.release) // a failing test's calls return: Close waits for them

	out := make(chan outcome, 4)
	go load(l, context.Background(), "a", "a", "x", out)
	waitFor(t, "the first call", func() bool { return f.calls.Load() == 1 })
	go load(l, context.Background(), "b", "b", "y", out)
	go load(l, context.Background(), "c", "c", "z", out)
	waitFor(t, "b and c in line", func() bool { return lineLen(l) == 2 })
	late.Store(true)
	f.release <- struct{}{}
	got := map[string]error{}
	for range 3 {
		o := recv(t, out)
		got[o.id] = o.err
	}
	if got["x"] != nil || !errors.Is(got["y"], ErrDeadline) || !errors.Is(got["z"], ErrDeadline) {
		t.Fatalf("outcomes %v, want x answered, y and z ErrDeadline", got)
	}
	if c := f.calls.Load(); c != 1 {
		t.Fatalf("%d calls, want 1", c)
	}
	if n := d.get(ErrDeadline); n != 2 {
		t.Fatalf("deadline drops %d, want 2", n)
	}
	if n := lineLen(l); n != 0 {
		t.Fatalf("line holds %d groups, want none", n)
	}
}
