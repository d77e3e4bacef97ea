package batch

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
)

// stepFetch records each call's ids as it starts and answers it only
// when step is sent to: the test decides when each call returns.
type stepFetch struct {
	mu    sync.Mutex
	calls [][]string
	step  chan struct{}
}

func (s *stepFetch) fetch(_ context.Context, _ string, ids []string) (map[string]string, error) {
	s.mu.Lock()
	s.calls = append(s.calls, slices.Clone(ids))
	s.mu.Unlock()
	<-s.step
	m := make(map[string]string, len(ids))
	for _, id := range ids {
		m[id] = "v:" + id
	}
	return m, nil
}

func (s *stepFetch) started() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

func (s *stepFetch) order() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	parts := make([]string, len(s.calls))
	for i, c := range s.calls {
		parts[i] = "[" + strings.Join(c, " ") + "]"
	}
	return strings.Join(parts, " ")
}

// release lets the oldest call return and waits for call n to start.
func (s *stepFetch) release(t *testing.T, n int) {
	t.Helper()
	s.step <- struct{}{}
	waitFor(t, "the next call", func() bool { return s.started() >= n })
}

func thenOut(out chan<- outcome, id string) func(string, bool, error) {
	return func(v string, found bool, err error) { out <- outcome{id, v, found, err} }
}

// TestOpenBatchJumpsListBatches: a one-id miss whose MaxWait is up goes in
// the next call a returning call lets go, ahead of a list's queued full
// batches, and such jumps alternate with the list's batches: the miss
// waits about one call, not the whole list (the prober's starvation: it
// went after all of them, or failed at its deadline).
func TestOpenBatchJumpsListBatches(t *testing.T) {
	s := &stepFetch{step: make(chan struct{})}
	l := New(Options{MaxSize: 2, MaxWait: 0, MaxInFlight: 1}, s.fetch)
	defer l.Close()
	defer close(s.step)
	ctx := context.Background()
	out := make(chan outcome, 16)

	l.LoadThen(ctx, nil, "g", "", "a", thenOut(out, "a"))
	waitFor(t, "a's call", func() bool { return s.started() == 1 })
	ids := idList("q", 6)
	req := l.Requester(len(ids))
	if err := l.Enlist(ctx, req, "g", "", ids); err != nil {
		t.Fatal(err)
	}
	l.LoadThen(ctx, nil, "g", "", "x", thenOut(out, "x"))
	s.release(t, 2)
	l.LoadThen(ctx, nil, "g", "", "y", thenOut(out, "y"))
	for n := 3; n <= 6; n++ {
		s.release(t, n)
	}
	want := "[a] [x] [q0 q1] [y] [q2 q3] [q4 q5]"
	if got := s.order(); got != want {
		t.Errorf("calls %s, want %s", got, want)
	}
}

// TestSoloBatchJumpsQueue: a batch holding a one-id request's id queued
// behind a list's batches goes next, whether one-id misses filled it or a
// later list's Enlist filled and closed the batch a miss had opened.
func TestSoloBatchJumpsQueue(t *testing.T) {
	s := &stepFetch{step: make(chan struct{})}
	l := New(Options{MaxSize: 2, MaxWait: never, MaxInFlight: 1}, s.fetch)
	defer l.Close()
	defer close(s.step)
	ctx := context.Background()
	out := make(chan outcome, 32)

	for _, id := range []string{"a", "b"} {
		l.LoadThen(ctx, nil, "g", "", id, thenOut(out, id))
	}
	waitFor(t, "a+b's call", func() bool { return s.started() == 1 })
	if err := l.Enlist(ctx, l.Requester(4), "g", "", idList("p", 4)); err != nil {
		t.Fatal(err)
	}
	l.LoadThen(ctx, nil, "g", "", "x", thenOut(out, "x"))
	if err := l.Enlist(ctx, l.Requester(4), "g", "", idList("r", 4)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"y", "z"} {
		l.LoadThen(ctx, nil, "g", "", id, thenOut(out, id))
	}
	for n := 2; n <= 6; n++ {
		s.release(t, n)
	}
	want := "[a b] [x r0] [p0 p1] [r3 y] [p2 p3] [r1 r2]"
	if got := s.order(); got != want {
		t.Errorf("calls %s, want %s", got, want)
	}
}

// TestListLeavesHeadroom: a list may fill at most ¾ of MaxQueued, so
// one-id misses still find room; a list admitted whole by a group with
// nothing queued, past its share, takes none of the misses' quarter.
func TestListLeavesHeadroom(t *testing.T) {
	for _, tc := range []struct {
		name string
		list int // ids of the first list
	}{{"within", 6}, {"idle-oversize", 20}} {
		t.Run(tc.name, func(t *testing.T) {
			fg := newHoldFetch()
			var d drops
			l := New(Options{MaxSize: 2, MaxWait: never, MaxInFlight: 1, MaxQueued: 8, OnDrop: d.on}, fg.fetch)
			defer l.Close()
			defer close(fg.release)
			ctx := context.Background()
			out := make(chan outcome, 64)
			for _, id := range []string{"a", "b"} {
				l.LoadThen(ctx, nil, "g", "", id, thenOut(out, id))
			}
			waitFor(t, "the first call", func() bool { return fg.calls.Load() == 1 })
			if err := l.Enlist(ctx, l.Requester(tc.list), "g", "", idList("q", tc.list)); err != nil {
				t.Fatalf("first list: %v", err)
			}
			if err := l.Enlist(ctx, l.Requester(1), "g", "", []string{"w"}); !errors.Is(err, ErrQueueFull) {
				t.Errorf("a list past the lists' share: err %v, want ErrQueueFull", err)
			}
			for _, id := range []string{"x", "y"} {
				var refused error
				l.LoadThen(ctx, nil, "g", "", id, func(_ string, _ bool, err error) { refused = err })
				if refused != nil {
					t.Errorf("one-id miss %s: %v, want room", id, refused)
				}
			}
			l.mu.Lock()
			queued := l.groups.get(keyOf("g")).queued
			l.mu.Unlock()
			if want := int32(tc.list + 2); queued != want {
				t.Errorf("queued %d, want %d", queued, want)
			}
			if _, _, err := l.Load(ctx, "g", "", "z"); !errors.Is(err, ErrQueueFull) {
				t.Errorf("one-id miss past MaxQueued: %v, want ErrQueueFull", err)
			}
		})
	}
}
