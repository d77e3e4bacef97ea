package batch

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// holdFetch is a fetch that counts its calls at once and answers each only
// when release is closed: the calls in flight hold their group's slots.
type holdFetch struct {
	calls   atomic.Int64
	release chan struct{}
}

func newHoldFetch() *holdFetch { return &holdFetch{release: make(chan struct{})} }

func (g *holdFetch) fetch(_ context.Context, _ string, ids []string) (map[string]string, error) {
	g.calls.Add(1)
	<-g.release
	m := make(map[string]string, len(ids))
	for _, id := range ids {
		m[id] = "v:" + id
	}
	return m, nil
}

// drops counts OnDrop by reason.
type drops struct {
	mu sync.Mutex
	n  map[error]int
}

func (d *drops) on(reason error, ids int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n = map[error]int{}
	}
	d.n[reason] += ids
}

func (d *drops) get(reason error) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[reason]
}

func idList(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = prefix + strconv.Itoa(i)
	}
	return ids
}

// TestQueueFullRefused: a group holding MaxQueued ids not yet sent
// refuses a new id at once (ErrQueueFull, counted), and a list whose ids
// would take it past the bound is refused whole, enlisting none; a
// pending id is still joined (it costs no room), and a group with
// nothing queued admits a list of any size (TestListLeavesHeadroom).
func TestQueueFullRefused(t *testing.T) {
	fg := newHoldFetch()
	var d drops
	l := New(Options{MaxSize: 2, MaxWait: never, MaxInFlight: 1, MaxQueued: 4, OnDrop: d.on}, fg.fetch)
	defer l.Close()
	defer close(fg.release)

	out := make(chan outcome, 16)
	for _, id := range []string{"a", "b"} { // full: in flight
		go load(l, context.Background(), "g", "", id, out)
	}
	waitFor(t, "the first call", func() bool { return fg.calls.Load() == 1 })
	req := l.Requester(3)
	if err := l.Enlist(context.Background(), req, "g", "", idList("q", 3)); err != nil {
		t.Fatalf("Enlist into an empty queue: %v", err)
	}
	for _, id := range idList("q", 3) {
		l.LoadThen(context.Background(), req, "g", "", id, func(v string, found bool, err error) { out <- outcome{id, v, found, err} })
	}
	// The lists' share is 3 of 4: w takes the misses' own room.
	l.LoadThen(context.Background(), nil, "g", "", "w", func(v string, found bool, err error) { out <- outcome{"w", v, found, err} })
	if _, _, err := l.Load(context.Background(), "g", "", "x"); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("Load past MaxQueued: err %v, want ErrQueueFull", err)
	}
	list := l.Requester(3)
	if err := l.Enlist(context.Background(), list, "g", "", []string{"q1", "y", "z"}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("Enlist past MaxQueued: err %v, want ErrQueueFull", err)
	}
	if n := len(list.enlisted); n != 0 {
		t.Errorf("refused list enlisted %d ids, want none", n)
	}
	if got := d.get(ErrQueueFull); got != 3 {
		t.Errorf("OnDrop(ErrQueueFull) counted %d ids, want 3 (x, then y and z)", got)
	}
	// q1 is pending: joining it takes no room.
	go load(l, context.Background(), "g", "", "q1", out)

	l.mu.Lock()
	queued := l.groups.get(keyOf("g")).queued
	l.mu.Unlock()
	if queued != 4 {
		t.Errorf("queued %d, want 4", queued)
	}
}

// TestDeadlineFailsUnsent: a batch not sent within Deadline of its
// opening fails with ErrDeadline without a call, once the call ahead of
// it returns, instead of waiting its turn; the call in flight is
// answered.
func TestDeadlineFailsUnsent(t *testing.T) {
	fg := newHoldFetch()
	var d drops
	const deadline = 20 * time.Millisecond
	l := New(Options{MaxSize: 1, MaxWait: never, MaxInFlight: 1, OnDrop: d.on,
		Deadline: func() time.Duration { return deadline }}, fg.fetch)
	defer l.Close()

	out := make(chan outcome, 3)
	go load(l, context.Background(), "g", "", "a", out)
	waitFor(t, "the first call", func() bool { return fg.calls.Load() == 1 })
	go load(l, context.Background(), "g", "", "b", out)
	go load(l, context.Background(), "g", "", "c", out)
	waitFor(t, "b and c to queue", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.groups.get(keyOf("g")).queued == 2
	})
	time.Sleep(3 * deadline) // past b's and c's due time
	close(fg.release)

	got := map[string]outcome{}
	for range 3 {
		o := recv(t, out)
		got[o.id] = o
	}
	if o := got["a"]; o.err != nil || o.v != "v:a" {
		t.Errorf("a (in flight) got %+v", o)
	}
	for _, id := range []string{"b", "c"} {
		if o := got[id]; !errors.Is(o.err, ErrDeadline) {
			t.Errorf("%s got %+v, want ErrDeadline", id, o)
		}
	}
	if n := fg.calls.Load(); n != 1 {
		t.Errorf("fetch called %d times, want 1: late batches go unsent", n)
	}
	if n := d.get(ErrDeadline); n != 2 {
		t.Errorf("OnDrop(ErrDeadline) counted %d ids, want 2", n)
	}
}

// TestDeadlineTellsLoadThen: a LoadThen waiter of a late batch is told
// ErrDeadline (once the call ahead returns), never left waiting.
func TestDeadlineTellsLoadThen(t *testing.T) {
	fg := newHoldFetch()
	const deadline = 10 * time.Millisecond
	l := New(Options{MaxSize: 1, MaxWait: never, MaxInFlight: 1,
		Deadline: func() time.Duration { return deadline }}, fg.fetch)
	defer l.Close()
	out := make(chan outcome, 2)
	for _, id := range []string{"a", "b"} {
		l.LoadThen(context.Background(), nil, "g", "", id, func(v string, found bool, err error) { out <- outcome{id, v, found, err} })
	}
	time.Sleep(3 * deadline)
	close(fg.release)
	for range 2 {
		if o := recv(t, out); o.id == "b" && !errors.Is(o.err, ErrDeadline) || o.id == "a" && o.err != nil {
			t.Errorf("got %+v", o)
		}
	}
	if n := fg.calls.Load(); n != 1 {
		t.Errorf("fetch called %d times, want 1", n)
	}
}

// TestAbandonedBatchesDropped: the queued batches of a list whose ctx
// ended are dropped without a call and leave the group's state, whether
// its ids' Loads came (LoadAs, left) or not (only Enlist); a batch one
// other waiter still waits on goes, with all its ids.
func TestAbandonedBatchesDropped(t *testing.T) {
	fg := newHoldFetch()
	var d drops
	l := New(Options{MaxSize: 2, MaxWait: never, MaxInFlight: 1, OnDrop: d.on}, fg.fetch)
	defer l.Close()

	out := make(chan outcome, 16)
	for _, id := range []string{"a", "b"} {
		go load(l, context.Background(), "g", "", id, out)
	}
	waitFor(t, "the first call", func() bool { return fg.calls.Load() == 1 })

	ctx, cancel := context.WithCancel(context.Background())
	ids := idList("q", 6) // three batches of 2
	req := l.Requester(len(ids))
	if err := l.Enlist(ctx, req, "g", "", ids); err != nil {
		t.Fatal(err)
	}
	// q0 and q1 are Loaded by the list (LoadAs), the others never are.
	var joined atomic.Int64
	for _, id := range ids[:2] {
		go func() {
			_, _, err := l.LoadAs(joinCtx{ctx, &joined}, req, "g", "", id)
			out <- outcome{id: id, err: err}
		}()
	}
	waitFor(t, "the list's loads to wait", func() bool { return joined.Load() == 2 })
	// Another client waits on q3: the batch holding q2 and q3 must go.
	stay := make(chan outcome, 1)
	go load(l, joinCtx{context.Background(), &joined}, "g", "", "q3", stay)
	waitFor(t, "q3's other waiter", func() bool { return joined.Load() == 3 })

	cancel()
	for range 2 {
		if o := recv(t, out); !errors.Is(o.err, context.Canceled) {
			t.Fatalf("list load got %+v, want context.Canceled", o)
		}
	}
	waitFor(t, "the abandoned batches to go", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		g := l.groups.get(keyOf("g"))
		return len(g.ready) == 1 && g.queued == 2
	})
	close(fg.release)
	if o := recv(t, stay); o.err != nil || o.v != "v:q3" {
		t.Errorf("q3's other waiter got %+v", o)
	}
	for range 2 {
		if o := recv(t, out); o.err != nil {
			t.Errorf("got %+v", o)
		}
	}
	l.Close() // wg: every batch, sent or dropped, is accounted for
	if n := fg.calls.Load(); n != 2 {
		t.Errorf("fetch called %d times, want 2 (a+b, then q2+q3): abandoned batches go unsent", n)
	}
	if n := d.get(ErrAbandoned); n != 4 {
		t.Errorf("OnDrop(ErrAbandoned) counted %d ids, want 4", n)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.groups.len(); n != 0 {
		t.Errorf("%d groups left, want none", n)
	}
}

// TestAbandonedKeepsLoadThen: a LoadThen waiter never leaves, so the
// batch it waits on goes though every list waiting with it left.
func TestAbandonedKeepsLoadThen(t *testing.T) {
	fg := newHoldFetch()
	l := New(Options{MaxSize: 2, MaxWait: never, MaxInFlight: 1}, fg.fetch)
	defer l.Close()
	out := make(chan outcome, 4)
	for _, id := range []string{"a", "b"} {
		go load(l, context.Background(), "g", "", id, out)
	}
	waitFor(t, "the first call", func() bool { return fg.calls.Load() == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	req := l.Requester(2)
	if err := l.Enlist(ctx, req, "g", "", []string{"x", "y"}); err != nil {
		t.Fatal(err)
	}
	l.LoadThen(context.Background(), nil, "g", "", "y", func(v string, found bool, err error) { out <- outcome{"y", v, found, err} })
	cancel()
	time.Sleep(10 * time.Millisecond) // leaveList's run
	close(fg.release)
	for range 3 {
		if o := recv(t, out); o.err != nil {
			t.Errorf("got %+v", o)
		}
	}
	if n := fg.calls.Load(); n != 2 {
		t.Errorf("fetch called %d times, want 2", n)
	}
}
