package batch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestListRetriesWithinBound: a shared call that fails for one list's bad
// id is retried for the lists waiting on it (partitionLocked), and those
// retries are queued whatever MaxQueued says (their ids were admitted).
// One retry per list, each holding that list's ids again, multiplied the
// queue by the lists sharing the call: 13 lists over four ids queued 29
// ids in a group bounded at 16 (the all-features soak: 932 ids in route
// u's group bounded at 896), and nothing bounded the lists that join
// pending ids for free. When the lists' own retries do not fit the bound,
// the retries hold each id of the failed call once, in one call per set
// of lists waiting on the same ids (an owner-set class): a good list's
// ids then still ride in calls of its own ids only, so a bad id fails
// its own lists, and no list pays more than its budget.
func TestListRetriesWithinBound(t *testing.T) {
	f := &badStepFetch{step: make(chan struct{})}
	var d drops
	const bound = 16
	l := New(Options{MaxSize: 4, MaxWait: never, MaxInFlight: 1, MaxQueued: bound, OnDrop: d.on}, f.fetch)

	out := make(chan outcome, 128)
	// A full batch of one-id loads holds the group's one slot.
	for _, id := range idList("h", 4) {
		l.LoadThen(context.Background(), nil, "g", "", id, thenOut(out, id))
	}
	waitFor(t, "the first call", func() bool { return f.started() == 1 })
	// A list with a bad id opens the lists' batch [a bad b c]; twelve
	// good lists over a, b, c join its pending ids, for free.
	lists := [][]string{{"a", "bad"}}
	for range 3 {
		lists = append(lists, []string{"a", "b"}, []string{"b", "c"}, []string{"a", "c"}, []string{"a", "b", "c"})
	}
	n := 4
	var reqs []*Requester
	for k, ids := range lists {
		req := l.Requester(len(ids))
		reqs = append(reqs, req)
		if err := l.Enlist(context.Background(), req, "g", "", ids); err != nil {
			t.Fatalf("list %d: Enlist: %v", k, err)
		}
		for _, id := range ids {
			l.LoadThen(context.Background(), req, "g", "", id, thenOut(out, fmt.Sprint("list", k, ":", id)))
			n++
		}
	}
	f.step <- struct{}{} // the one-id call returns; the lists' call goes
	waitFor(t, "the lists' shared call", func() bool { return f.started() == 2 })
	f.step <- struct{}{} // and fails for bad: its retries are queued, one sent
	waitFor(t, "the first retry", func() bool { return f.started() == 3 })
	if q := l.Queued(); q > bound {
		t.Errorf("the lists' retries queued %d ids in a group bounded at %d (MaxQueued)", q, bound)
	}
	close(f.step)
	l.Close()
	for range n {
		o := recv(t, out)
		bad := strings.HasSuffix(o.id, "bad")
		switch {
		case bad && o.err == nil:
			t.Errorf("%s: answered %q, want an error", o.id, o.v)
		case !bad && (o.err != nil || o.v != "v:"+o.id[strings.LastIndex(o.id, ":")+1:]):
			t.Errorf("%s (a good id): %q, %v", o.id, o.v, o.err)
		}
	}
	// The retries of [a bad b c]: one class each (the lists waiting on
	// a, on b, on c and on bad differ), each id held once.
	f.mu.Lock()
	retried := slices.Concat(f.calls[2:]...)
	f.mu.Unlock()
	slices.Sort(retried)
	if want := []string{"a", "b", "bad", "c"}; !slices.Equal(retried, want) {
		t.Errorf("the retries held %v, want each id of the failed call once: %v", retried, want)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, req := range reqs {
		if req.calls > req.budget {
			t.Errorf("list %d (%v): charged %d calls, budget %d", k, lists[k], req.calls, req.budget)
		}
	}
	if n := d.get(ErrQueueFull); n != 0 {
		t.Errorf("%d ids refused ErrQueueFull", n)
	}
}
