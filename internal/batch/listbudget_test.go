package batch

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// TestListJoiningOthersBatchesCostsNoBudget: a list's ids that reach the
// loader one window at a time (a loaded machine runs the proxy's per-id
// goroutines late) each join a batch another request opened. Those batches
// go whatever the list does, so joining them must not spend its budget. It
// did: every distinct batch joined was counted, so a list of 12 good ids
// joining 12 one-id requests' batches ran out of its Budget(12) = 9 and
// failed 3 ids with ErrBudget (a 502 from the proxy, the upstream healthy).
func TestListJoiningOthersBatchesCostsNoBudget(t *testing.T) {
	const n = 12
	g := newGate()
	l := New(Options{MaxSize: 2, MaxWait: never}, g.fetch)
	req := l.Requester(n)
	var joined atomic.Int64
	single := make(chan outcome, n)
	list := make(chan outcome, n)
	for k := range n {
		// A one-id request opens batch k; the list's id k joins it and
		// fills it (max_size 2), so it goes and the next one-id request
		// opens batch k+1.
		j := joined.Load()
		go load(l, joinCtx{context.Background(), &joined}, "g", "", fmt.Sprint("o", k), single)
		waitFor(t, fmt.Sprintf("one-id o%d to join", k), func() bool { return joined.Load() == j+1 })
		id := fmt.Sprint("l", k)
		l.LoadThen(context.Background(), req, "g", "", id, func(v string, found bool, err error) {
			list <- outcome{id, v, found, err}
		})
	}
	close(g.release)
	for range n {
		if o := recv(t, list); o.err != nil || !o.found || o.v != "v:"+o.id {
			t.Errorf("list id %s: %q found=%v err=%v", o.id, o.v, o.found, o.err)
		}
	}
	l.Close() // on failure a one-id batch is left open
	for range n {
		if o := recv(t, single); o.err != nil {
			t.Errorf("one-id %s: %v", o.id, o.err)
		}
	}
	if c := g.calls.Load(); c != n {
		t.Errorf("%d upstream calls, want the %d batches the one-id requests opened", c, n)
	}
}
