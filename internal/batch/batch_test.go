package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitTimeout only expires when the code under test hangs.
const waitTimeout = 10 * time.Second

// never is a MaxWait that does not fire during a test: batches in tests that
// use it are fetched because they filled up, or by Close.
const never = time.Hour

// joinCtx counts the Loads that have joined a batch: Load calls Done only in
// its final select, after the id is in the batch. Waiting on the count
// replaces sleeps as the "everyone is in" signal.
type joinCtx struct {
	context.Context
	joined *atomic.Int64
}

func (c joinCtx) Done() <-chan struct{} {
	c.joined.Add(1)
	return c.Context.Done()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatal("timed out waiting for a result")
		panic("unreachable")
	}
}

// recorder is a fetch that answers "v:<id>" for every id except those in
// missing, and records each call.
type recorder struct {
	mu      sync.Mutex
	calls   [][]string
	args    []string
	missing map[string]bool
	err     error
	hold    chan struct{} // if set, fetch waits for it to close
	ctxErrs []error
}

func (r *recorder) fetch(ctx context.Context, arg string, ids []string) (map[string]string, error) {
	if r.hold != nil {
		<-r.hold
	}
	r.mu.Lock()
	r.calls = append(r.calls, slices.Clone(ids))
	r.args = append(r.args, arg)
	r.ctxErrs = append(r.ctxErrs, ctx.Err())
	r.mu.Unlock()
	if r.err != nil {
		return nil, r.err
	}
	m := make(map[string]string, len(ids))
	for _, id := range ids {
		if !r.missing[id] {
			m[id] = "v:" + id
		}
	}
	return m, nil
}

func (r *recorder) snapshot() ([][]string, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls), slices.Clone(r.args)
}

type outcome struct {
	id    string
	v     string
	found bool
	err   error
}

func load(l *Loader[string, string], ctx context.Context, group, arg, id string, out chan<- outcome) {
	v, found, err := l.Load(ctx, group, arg, id)
	out <- outcome{id, v, found, err}
}

func TestManyDistinctIDs(t *testing.T) {
	const n, size = 500, 100
	var rec recorder
	var sizes []int
	var sizesMu sync.Mutex
	l := New(Options{MaxSize: size, MaxWait: time.Second, OnBatch: func(s int) {
		sizesMu.Lock()
		sizes = append(sizes, s)
		sizesMu.Unlock()
	}}, rec.fetch)
	defer l.Close()

	out := make(chan outcome, n)
	for i := range n {
		go load(l, context.Background(), "g", "", strconv.Itoa(i), out)
	}
	for range n {
		o := recv(t, out)
		if o.err != nil || !o.found || o.v != "v:"+o.id {
			t.Fatalf("load %s got (%q, %v, %v)", o.id, o.v, o.found, o.err)
		}
	}

	calls, _ := rec.snapshot()
	t.Logf("%d fetches for %d ids", len(calls), n)
	if len(calls) > 10 {
		t.Errorf("%d fetches, want <= 10", len(calls))
	}
	seen := map[string]int{}
	for _, ids := range calls {
		if len(ids) > size {
			t.Errorf("fetch of %d ids, over MaxSize %d", len(ids), size)
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
	sizesMu.Lock()
	defer sizesMu.Unlock()
	if len(sizes) != len(calls) {
		t.Errorf("OnBatch called %d times for %d fetches", len(sizes), len(calls))
	}
}

func TestDuplicatesFetchedOnce(t *testing.T) {
	const dups = 5
	var rec recorder
	var joined atomic.Int64
	l := New(Options{MaxSize: 2, MaxWait: never}, rec.fetch)
	defer l.Close()

	out := make(chan outcome, dups+1)
	for range dups {
		go load(l, joinCtx{context.Background(), &joined}, "g", "", "a", out)
	}
	waitFor(t, "duplicates to join", func() bool { return joined.Load() == dups })
	go load(l, context.Background(), "g", "", "b", out) // second distinct id fills the batch

	for range dups + 1 {
		o := recv(t, out)
		if o.err != nil || !o.found || o.v != "v:"+o.id {
			t.Fatalf("load %s got (%q, %v, %v)", o.id, o.v, o.found, o.err)
		}
	}
	calls, _ := rec.snapshot()
	if len(calls) != 1 || !slices.Equal(calls[0], []string{"a", "b"}) {
		t.Fatalf("fetches %v, want [[a b]]", calls)
	}
}

func TestFullBatchOpensNewOne(t *testing.T) {
	var rec recorder
	var joined atomic.Int64
	l := New(Options{MaxSize: 2, MaxWait: never}, rec.fetch)

	out := make(chan outcome, 3)
	go load(l, context.Background(), "g", "", "a", out)
	go load(l, context.Background(), "g", "", "b", out)
	// MaxWait never fires: these return only if a full batch is fetched at once.
	for range 2 {
		if o := recv(t, out); o.err != nil || o.v != "v:"+o.id {
			t.Fatalf("got %+v", o)
		}
	}
	go load(l, joinCtx{context.Background(), &joined}, "g", "", "c", out)
	waitFor(t, "c to join", func() bool { return joined.Load() == 1 })
	l.Close() // flushes the new batch holding c
	if o := recv(t, out); o.err != nil || o.v != "v:c" {
		t.Fatalf("got %+v", o)
	}
	calls, _ := rec.snapshot()
	if len(calls) != 2 || len(calls[0]) != 2 || !slices.Equal(calls[1], []string{"c"}) {
		t.Fatalf("fetches %v, want [[a b] [c]] (a, b in any order)", calls)
	}
}

func TestMissingIDsNotFound(t *testing.T) {
	rec := recorder{missing: map[string]bool{"2": true, "4": true}}
	l := New(Options{MaxSize: 5, MaxWait: never}, rec.fetch)
	defer l.Close()

	out := make(chan outcome, 5)
	for i := 1; i <= 5; i++ {
		go load(l, context.Background(), "g", "", strconv.Itoa(i), out)
	}
	for range 5 {
		o := recv(t, out)
		if o.err != nil {
			t.Fatal(o.err)
		}
		wantFound := !rec.missing[o.id]
		if o.found != wantFound {
			t.Errorf("id %s: found=%v, want %v", o.id, o.found, wantFound)
		}
		if wantFound && o.v != "v:"+o.id {
			t.Errorf("id %s: got %q", o.id, o.v)
		}
		if !wantFound && o.v != "" {
			t.Errorf("id %s: not found but got value %q", o.id, o.v)
		}
	}
}

func TestFetchFailureFailsEveryWaiter(t *testing.T) {
	errUpstream := errors.New("bulk call failed")
	tests := []struct {
		name  string
		fetch FetchFunc[string, string]
		want  error
	}{
		{"error", func(context.Context, string, []string) (map[string]string, error) {
			return map[string]string{"1": "partial"}, fmt.Errorf("upstream: %w", errUpstream)
		}, errUpstream},
		{"panic", func(context.Context, string, []string) (map[string]string, error) {
			panic("boom")
		}, ErrPanicked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New(Options{MaxSize: 4, MaxWait: never}, tt.fetch)
			defer l.Close()
			out := make(chan outcome, 4)
			for i := range 4 {
				go load(l, context.Background(), "g", "", strconv.Itoa(i), out)
			}
			for range 4 {
				o := recv(t, out)
				if !errors.Is(o.err, tt.want) || o.found || o.v != "" {
					t.Fatalf("id %s got (%q, %v, %v), want error %v", o.id, o.v, o.found, o.err, tt.want)
				}
			}
		})
	}
}

// TestPanicToldOnce: a panicked fetch is told to OnPanic once, with its
// stack, however many waiters it fails, and their error carries the panic's
// value but not the stack (logged once, not once per waiter); the group's
// slot is free again for the next call.
func TestPanicToldOnce(t *testing.T) {
	var told atomic.Int64
	var stack atomic.Value
	var fail atomic.Bool
	fail.Store(true)
	l := New(Options{MaxSize: 4, MaxWait: never, MaxInFlight: 1, OnPanic: func(v any, st []byte) {
		told.Add(1)
		stack.Store(string(st))
	}}, func(_ context.Context, _ string, ids []string) (map[string]string, error) {
		if fail.Load() {
			panic("boom")
		}
		m := make(map[string]string, len(ids))
		for _, id := range ids {
			m[id] = "v:" + id
		}
		return m, nil
	})
	defer l.Close()
	out := make(chan outcome, 4)
	for i := range 4 {
		go load(l, context.Background(), "g", "", strconv.Itoa(i), out)
	}
	for range 4 {
		o := recv(t, out)
		if !errors.Is(o.err, ErrPanicked) || !strings.Contains(o.err.Error(), "boom") || strings.Contains(o.err.Error(), "goroutine ") {
			t.Fatalf("id %s: error %v, want ErrPanicked with the value and no stack", o.id, o.err)
		}
	}
	if n := told.Load(); n != 1 {
		t.Errorf("OnPanic told %d times for one fetch, want 1", n)
	}
	if st, _ := stack.Load().(string); !strings.Contains(st, "goroutine ") {
		t.Errorf("OnPanic's stack %q", st)
	}
	fail.Store(false)
	for i := range 4 {
		go load(l, context.Background(), "g", strconv.Itoa(i), strconv.Itoa(i), out)
	}
	for range 4 {
		if o := recv(t, out); o.err != nil || o.v != "v:"+o.id {
			t.Fatalf("after the panic: %+v", o)
		}
	}
}

func TestGroupsNeverShare(t *testing.T) {
	var rec recorder
	var joined atomic.Int64
	l := New(Options{MaxSize: 100, MaxWait: never}, rec.fetch)

	out := make(chan outcome, 6)
	// Openers first, so the arg each batch carries is known.
	go load(l, joinCtx{context.Background(), &joined}, "g1", "opener1", "1", out)
	go load(l, joinCtx{context.Background(), &joined}, "g2", "opener2", "1", out)
	waitFor(t, "openers to join", func() bool { return joined.Load() == 2 })
	for _, id := range []string{"2", "3"} {
		go load(l, joinCtx{context.Background(), &joined}, "g1", "late1", id, out)
		go load(l, joinCtx{context.Background(), &joined}, "g2", "late2", id, out)
	}
	waitFor(t, "everyone to join", func() bool { return joined.Load() == 6 })
	l.Close()
	for range 6 {
		if o := recv(t, out); o.err != nil || o.v != "v:"+o.id {
			t.Fatalf("got %+v", o)
		}
	}

	calls, args := rec.snapshot()
	if len(calls) != 2 {
		t.Fatalf("%d fetches %v, want one per group", len(calls), calls)
	}
	slices.Sort(args)
	if !slices.Equal(args, []string{"opener1", "opener2"}) {
		t.Errorf("fetch args %v, want each group's opener's", args)
	}
	for _, ids := range calls {
		slices.Sort(ids)
		if !slices.Equal(ids, []string{"1", "2", "3"}) {
			t.Errorf("fetch ids %v, want [1 2 3] per group", ids)
		}
	}
}

func TestCancelledWaiterLeaves(t *testing.T) {
	var rec recorder
	var joined atomic.Int64
	l := New(Options{MaxSize: 3, MaxWait: never}, rec.fetch)
	defer l.Close()

	// The quitter opens the batch, so fetch also gets its (cancelled) ctx.
	qctx, cancel := context.WithCancel(context.Background())
	quitter := make(chan outcome, 1)
	go load(l, joinCtx{qctx, &joined}, "g", "", "q", quitter)
	waitFor(t, "quitter to join", func() bool { return joined.Load() == 1 })
	stayers := make(chan outcome, 2)
	go load(l, joinCtx{context.Background(), &joined}, "g", "", "s1", stayers)
	waitFor(t, "stayer to join", func() bool { return joined.Load() == 2 })

	cancel()
	// The batch is not full and MaxWait never fires: the quitter must come
	// back on its own.
	if o := recv(t, quitter); !errors.Is(o.err, context.Canceled) || o.found {
		t.Fatalf("quitter got %+v, want context.Canceled", o)
	}
	if calls, _ := rec.snapshot(); len(calls) != 0 {
		t.Fatalf("fetched %v before the batch was full", calls)
	}

	go load(l, context.Background(), "g", "", "s2", stayers) // fills the batch
	for range 2 {
		if o := recv(t, stayers); o.err != nil || !o.found || o.v != "v:"+o.id {
			t.Fatalf("stayer got %+v", o)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.calls) != 1 || len(rec.calls[0]) != 3 {
		t.Fatalf("fetches %v, want one of 3 ids", rec.calls)
	}
	if rec.ctxErrs[0] != nil {
		t.Errorf("fetch ctx ended with the opener's: %v", rec.ctxErrs[0])
	}
}

func TestMaxWaitFiresForLoneID(t *testing.T) {
	var rec recorder
	l := New(Options{MaxSize: 100, MaxWait: 5 * time.Millisecond}, rec.fetch)
	defer l.Close()

	out := make(chan outcome, 1)
	go load(l, context.Background(), "g", "", "lone", out)
	if o := recv(t, out); o.err != nil || !o.found || o.v != "v:lone" {
		t.Fatalf("got %+v", o)
	}
	if calls, _ := rec.snapshot(); len(calls) != 1 || !slices.Equal(calls[0], []string{"lone"}) {
		t.Fatalf("fetches %v, want [[lone]]", calls)
	}
}

func TestClose(t *testing.T) {
	rec := recorder{hold: make(chan struct{})}
	var joined atomic.Int64
	l := New(Options{MaxSize: 100, MaxWait: never}, rec.fetch)

	out := make(chan outcome, 1)
	go load(l, joinCtx{context.Background(), &joined}, "g", "", "a", out)
	waitFor(t, "load to join", func() bool { return joined.Load() == 1 })

	closed := make(chan struct{})
	go func() { l.Close(); close(closed) }()
	// Close dispatched the batch but must wait for the held fetch.
	select {
	case <-closed:
		t.Fatal("Close returned while a fetch was running")
	case <-out:
		t.Fatal("load returned while its fetch was held")
	case <-time.After(20 * time.Millisecond):
	}
	close(rec.hold)
	recv(t, closed)
	if o := recv(t, out); o.err != nil || o.v != "v:a" {
		t.Fatalf("queued load got %+v", o)
	}
	if _, _, err := l.Load(context.Background(), "g", "", "b"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Load after Close: %v, want ErrClosed", err)
	}
}

func TestDoneContextDoesNotJoin(t *testing.T) {
	var rec recorder
	l := New(Options{MaxSize: 1, MaxWait: never}, rec.fetch)
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := l.Load(ctx, "g", "", "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	l.Close()
	if calls, _ := rec.snapshot(); len(calls) != 0 {
		t.Fatalf("fetched %v for a caller whose ctx had already ended", calls)
	}
}
