package batch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// badStepFetch is stepFetch whose calls holding "bad" fail with
// ErrIsolate (the upstream's 4xx for one id of the call), once stepped.
type badStepFetch struct {
	mu    sync.Mutex
	calls [][]string
	step  chan struct{}
}

func (s *badStepFetch) fetch(_ context.Context, _ string, ids []string) (map[string]string, error) {
	s.mu.Lock()
	s.calls = append(s.calls, slices.Clone(ids))
	s.mu.Unlock()
	<-s.step
	if slices.Contains(ids, "bad") {
		return nil, fmt.Errorf("400 for bad: %w", ErrIsolate)
	}
	m := make(map[string]string, len(ids))
	for _, id := range ids {
		m[id] = "v:" + id
	}
	return m, nil
}

func (s *badStepFetch) started() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// TestListRetriesLeaveOneIDShare: a shared call of lists' ids that fails
// for one bad id is retried for the list requests waiting on it
// (partitionLocked). Those ids are the lists' own, admitted already, and
// their retries must go (refusing one would fail a good id for another's
// bad one); but they are lists' ids, and must not take the quarter of
// the queue one-id loads keep for themselves (listShare, over), in a
// group's queue (MaxQueued) or the loader's (MaxQueuedAll). They did:
// retries counted as one-id loads' ids, so the queue was "full" for a
// one-id read of a good id, refused at once with ErrQueueFull (the
// proxy's 503 "upstream busy"): the invariant soak's crowd round with
// list-crowd-bad (200 lists over 96 ids) answered a good id's read 503.
// Lists' retries that would overfill the queue hold each id once
// (classesLocked, TestListRetriesWithinBound): here, n lists of the same
// four ids, halved at once; within the bound, one retry per list. Either
// way a new list within the bound is admitted.
func TestListRetriesLeaveOneIDShare(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   Options
		lists  int
		queued int // ids queued once the first retry went
	}{
		// Bound 16: 8 retries of 4 ids would take the queue past it;
		// the lists' four ids, one class, are halved: 2 + 2, one sent.
		{"group", Options{MaxQueued: 16}, 8, 2},
		{"loader", Options{MaxQueuedAll: 16}, 8, 2},
		// Bound 48 (share 36): 10 retries of 4 ids fit, one per list;
		// the 9 not sent are past the share, which leaves a new list room
		// within the bound.
		{"group within bound", Options{MaxQueued: 48}, 10, 36},
	} {
		t.Run(tc.name, func(t *testing.T) { testListRetriesLeaveOneIDShare(t, tc.opts, tc.lists, tc.queued) })
	}
}

func testListRetriesLeaveOneIDShare(t *testing.T, opts Options, lists, queued int) {
	f := &badStepFetch{step: make(chan struct{})}
	var d drops
	opts.MaxSize, opts.MaxWait, opts.MaxInFlight, opts.OnDrop = 4, never, 1, d.on
	l := New(opts, f.fetch)

	out := make(chan outcome, 128)
	// A full batch of one-id loads holds the group's one slot.
	for _, id := range idList("h", 4) {
		l.LoadThen(context.Background(), nil, "g", "", id, thenOut(out, id))
	}
	waitFor(t, "the first call", func() bool { return f.started() == 1 })
	// Lists of the same four ids, a bad one among them: the first
	// enlists them (a full batch, queued), the others join its ids.
	ids := []string{"x0", "x1", "x2", "bad"}
	for k := range lists {
		req := l.Requester(len(ids))
		if err := l.Enlist(context.Background(), req, "g", "", ids); err != nil {
			t.Fatalf("list %d: Enlist: %v", k, err)
		}
		for _, id := range ids {
			l.LoadThen(context.Background(), req, "g", "", id, thenOut(out, fmt.Sprint("list", k, ":", id)))
		}
	}
	// The one-id call returns; the lists' shared call goes and fails for
	// bad; each list's retry of its four ids is queued, the first sent.
	f.step <- struct{}{}
	waitFor(t, "the lists' shared call", func() bool { return f.started() == 2 })
	f.step <- struct{}{}
	waitFor(t, "the first list's retry", func() bool { return f.started() == 3 })
	if q := l.Queued(); q != queued {
		t.Fatalf("queued %d ids once the first retry went, want %d", q, queued)
	}
	// A one-id read of a good id, not pending anywhere: it has the one-id
	// loads' own room, untouched.
	l.LoadThen(context.Background(), nil, "g", "", "y", thenOut(out, "y"))
	if n := d.get(ErrQueueFull); n != 0 {
		t.Errorf("a one-id load of a good id refused (ErrQueueFull, %d ids) behind %d ids of lists' retries: the one-id loads' quarter was taken by the lists", n, l.Queued())
	}
	n := 4 + lists*len(ids) + 1
	if err := l.Enlist(context.Background(), l.Requester(2), "g", "", []string{"z0", "z1"}); err != nil {
		t.Errorf("a new list within the bound, its share taken by retries only: Enlist err %v, want admitted", err)
	} else {
		for _, id := range []string{"z0", "z1"} {
			l.LoadThen(context.Background(), nil, "g", "", id, thenOut(out, id))
		}
		n += 2
	}
	close(f.step) // every call returns now
	l.Close()     // and y's open batch goes
	got := map[string]outcome{}
	for range n {
		o := recv(t, out)
		got[o.id] = o
	}
	for id, o := range got {
		bad := strings.HasSuffix(o.id, "bad")
		switch {
		case bad && o.err == nil:
			t.Errorf("%s: answered %q, want an error", id, o.v)
		case !bad && o.err != nil:
			t.Errorf("%s (a good id): %v", id, o.err)
		}
	}
}
