package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gate is a fetch the test holds: each call is counted as it starts, then
// waits to receive from release (close it to let every call through, or
// send once per call to let them through one by one). It records how many
// calls run at once, and answers "v:<id>", failing with an isolatable
// rejected error when the call holds an id in bad.
type gate struct {
	release chan struct{}
	bad     map[string]bool

	calls   atomic.Int64
	running atomic.Int64
	peak    atomic.Int64

	mu      sync.Mutex
	batches [][]string
}

func newGate() *gate { return &gate{release: make(chan struct{})} }

// rejected is an upstream's own answer about one id, such as
// "400 bad id x7", as the proxy's fetch would carry it.
type rejected struct{ id string }

func (e *rejected) Error() string { return "400 bad id " + e.id }

func (g *gate) fetch(_ context.Context, _ string, ids []string) (map[string]string, error) {
	g.calls.Add(1)
	n := g.running.Add(1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
	g.mu.Lock()
	g.batches = append(g.batches, slices.Clone(ids))
	g.mu.Unlock()
	if g.release != nil {
		<-g.release
	}
	g.running.Add(-1)
	for _, id := range ids {
		if g.bad[id] {
			return nil, fmt.Errorf("%w: %w", ErrIsolate, &rejected{id})
		}
	}
	m := make(map[string]string, len(ids))
	for _, id := range ids {
		m[id] = "v:" + id
	}
	return m, nil
}

func (g *gate) snapshot() [][]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.batches)
}

// TestWindowFillsWhileCallInFlight is the 500 cold GETs of issue 11: 500
// distinct ids, max_size 100, max_wait 2ms. The first call leaves after
// max_wait and is held until every load has joined; everything that joins
// meanwhile must go in full batches, so at most 1 + ⌈499/100⌉ = 6 calls
// (5 is the floor), however slowly the loads arrive.
func TestWindowFillsWhileCallInFlight(t *testing.T) {
	const n, size = 500, 100
	for _, arrival := range []string{"all at once", "one by one"} {
		t.Run(arrival, func(t *testing.T) {
			g := newGate()
			var joined atomic.Int64
			l := New(Options{MaxSize: size, MaxWait: 2 * time.Millisecond}, g.fetch)
			defer l.Close()

			out := make(chan outcome, n)
			for i := range n {
				go load(l, joinCtx{context.Background(), &joined}, "g", "", strconv.Itoa(i), out)
				if arrival == "one by one" {
					waitFor(t, "load "+strconv.Itoa(i)+" to join", func() bool { return joined.Load() == int64(i+1) })
				}
			}
			waitFor(t, "every load to join", func() bool { return joined.Load() == n })
			close(g.release)
			for range n {
				if o := recv(t, out); o.err != nil || !o.found || o.v != "v:"+o.id {
					t.Fatalf("load %s got (%q, %v, %v)", o.id, o.v, o.found, o.err)
				}
			}

			calls := g.snapshot()
			t.Logf("%d calls for %d ids", len(calls), n)
			if len(calls) > 6 {
				t.Errorf("%d bulk calls, want <= 6", len(calls))
			}
			seen := map[string]int{}
			for _, ids := range calls {
				if len(ids) > size {
					t.Errorf("call of %d ids, over MaxSize %d", len(ids), size)
				}
				for _, id := range ids {
					seen[id]++
				}
			}
			for i := range n {
				if c := seen[strconv.Itoa(i)]; c != 1 {
					t.Errorf("id %d fetched %d times, want 1", i, c)
				}
			}
		})
	}
}

// TestMaxInFlightBoundsCallsPerGroup queues six full batches in one group
// and lets the held calls return one at a time: no more than MaxInFlight
// run at once, and every batch still goes.
func TestMaxInFlightBoundsCallsPerGroup(t *testing.T) {
	const ids = 12 // six batches of two
	for _, m := range []int{1, 2, 3} {
		t.Run(fmt.Sprint("max_in_flight=", m), func(t *testing.T) {
			g := newGate()
			var joined atomic.Int64
			l := New(Options{MaxSize: 2, MaxWait: never, MaxInFlight: m}, g.fetch)
			defer l.Close()

			out := make(chan outcome, ids)
			for i := range ids {
				go load(l, joinCtx{context.Background(), &joined}, "g", "", strconv.Itoa(i), out)
			}
			waitFor(t, "every load to join", func() bool { return joined.Load() == ids })
			waitFor(t, "the first calls to start", func() bool { return g.calls.Load() >= int64(m) })
			if c := g.calls.Load(); c != int64(m) {
				t.Errorf("%d calls started before any returned, want %d", c, m)
			}
			for range ids / 2 {
				g.release <- struct{}{} // one call returns; the next may start
			}
			for range ids {
				if o := recv(t, out); o.err != nil || o.v != "v:"+o.id {
					t.Fatalf("got %+v", o)
				}
			}
			if c := g.calls.Load(); c != ids/2 {
				t.Errorf("%d calls, want %d", c, ids/2)
			}
			if p := g.peak.Load(); p != int64(m) {
				t.Errorf("%d calls ran at once, want %d", p, m)
			}
		})
	}
}

func TestDefaultMaxInFlightIsTwo(t *testing.T) {
	g := newGate()
	var joined atomic.Int64
	l := New(Options{MaxSize: 1, MaxWait: never}, g.fetch)
	out := make(chan outcome, 4)
	for i := range 4 {
		go load(l, joinCtx{context.Background(), &joined}, "g", "", strconv.Itoa(i), out)
	}
	waitFor(t, "every load to join", func() bool { return joined.Load() == 4 })
	waitFor(t, "two calls to start", func() bool { return g.calls.Load() >= 2 })
	close(g.release)
	l.Close()
	if p := g.peak.Load(); p != DefaultMaxInFlight {
		t.Errorf("%d calls ran at once, want %d", p, DefaultMaxInFlight)
	}
}

// TestDuplicateJoinsQueuedBatch: an id already waiting in a full batch that
// has no slot yet shares that batch's call rather than opening another.
func TestDuplicateJoinsQueuedBatch(t *testing.T) {
	g := newGate()
	var joined atomic.Int64
	l := New(Options{MaxSize: 2, MaxWait: never, MaxInFlight: 1}, g.fetch)
	defer l.Close()

	out := make(chan outcome, 5)
	for i, id := range []string{"a", "b", "c", "d", "c"} {
		go load(l, joinCtx{context.Background(), &joined}, "g", "", id, out)
		waitFor(t, id+" to join", func() bool { return joined.Load() == int64(i+1) })
	}
	close(g.release)
	for range 5 {
		if o := recv(t, out); o.err != nil || o.v != "v:"+o.id {
			t.Fatalf("got %+v", o)
		}
	}
	if calls := g.snapshot(); !slices.EqualFunc(calls, [][]string{{"a", "b"}, {"c", "d"}}, slices.Equal) {
		t.Fatalf("calls %v, want [[a b] [c d]]", calls)
	}
}

// TestGroupCapFetchesNewGroupsAlone: with MaxGroups groups open, a Load for
// another group is fetched at once on its own; once a group drains, a new
// one batches again.
func TestGroupCapFetchesNewGroupsAlone(t *testing.T) {
	var rec recorder
	var joined, overflows atomic.Int64
	l := New(Options{MaxSize: 2, MaxWait: never, MaxGroups: 2, OnOverflow: func() { overflows.Add(1) }}, rec.fetch)
	defer l.Close()

	out := make(chan outcome, 8)
	go load(l, joinCtx{context.Background(), &joined}, "g1", "1", "a", out)
	go load(l, joinCtx{context.Background(), &joined}, "g2", "2", "b", out)
	waitFor(t, "two groups to open", func() bool { return joined.Load() == 2 })

	// MaxWait never fires and the batch is not full: only the cap answers.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if v, found, err := l.Load(ctx, "g3", "3", "c"); err != nil || !found || v != "v:c" {
		t.Fatalf("over the cap got (%q, %v, %v)", v, found, err)
	}
	if calls, args := rec.snapshot(); !slices.EqualFunc(calls, [][]string{{"c"}}, slices.Equal) || args[0] != "3" {
		t.Fatalf("calls %v args %v, want [[c]] with arg 3", calls, args)
	}
	if o := overflows.Load(); o != 1 {
		t.Fatalf("OnOverflow called %d times, want 1", o)
	}

	go load(l, context.Background(), "g1", "1", "a2", out) // fills and drains g1
	for range 2 {
		if o := recv(t, out); o.err != nil || o.v != "v:"+o.id || o.id == "b" {
			t.Fatalf("got %+v", o)
		}
	}
	waitFor(t, "g1 to be forgotten", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.groups.len() == 1
	})
	go load(l, joinCtx{context.Background(), &joined}, "g3", "3", "c1", out)
	waitFor(t, "c1 to join", func() bool { return joined.Load() == 3 })
	go load(l, context.Background(), "g3", "3", "c2", out)
	for range 2 {
		if o := recv(t, out); o.err != nil || o.v != "v:"+o.id {
			t.Fatalf("got %+v", o)
		}
	}
	calls, _ := rec.snapshot()
	if last := calls[len(calls)-1]; len(calls) != 3 || len(last) != 2 {
		t.Fatalf("calls %v, want g3 batched as [c1 c2] once g1 drained", calls)
	}
	if o := overflows.Load(); o != 1 {
		t.Fatalf("OnOverflow called %d times, want 1", o)
	}
}

// TestCloseDrainsQueuedBatches: batches queued behind MaxInFlight are still
// fetched by Close.
func TestCloseDrainsQueuedBatches(t *testing.T) {
	g := newGate()
	var joined atomic.Int64
	l := New(Options{MaxSize: 1, MaxWait: never, MaxInFlight: 1}, g.fetch)
	out := make(chan outcome, 3)
	for i := range 3 {
		go load(l, joinCtx{context.Background(), &joined}, "g", "", strconv.Itoa(i), out)
	}
	waitFor(t, "every load to join", func() bool { return joined.Load() == 3 })
	close(g.release)
	l.Close()
	for range 3 {
		if o := recv(t, out); o.err != nil || o.v != "v:"+o.id {
			t.Fatalf("got %+v", o)
		}
	}
	if _, _, err := l.Load(context.Background(), "g", "", "x"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Load after Close: %v", err)
	}
}
