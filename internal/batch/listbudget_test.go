package batch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
)

// TestListJoiningOthersBatchesCostsNoBudget: a list's ids that reach the
// loader one window at a time (a loaded machine runs the proxy's per-id
// goroutines late) each join a batch another request opened. Those batches
// go whatever the list does, so joining them must not spend its budget. It
// did: every distinct batch joined was counted, so a list of 12 good ids
// joining 12 one-id requests' batches ran out of its budget (9 then) and
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

// expireOpen ends the max_wait of group's open batch, if any, as its
// timer would.
func expireOpen(l *Loader[string, string], group string) {
	l.mu.Lock()
	var b *batch[string, string]
	if g := l.groups.get(keyOf(group)); g != nil {
		b = g.open
	}
	l.mu.Unlock()
	if b != nil {
		l.expire(b)
	}
}

// TestEnlistedListLateLoadsShareOneCall: a list of 12 ids whose per-id
// loads run one max_wait window apart, each after the previous one was
// answered (the proxy's per-id goroutines on a loaded machine). Each used
// to open, and pay for, a batch of its own: 12 calls, past Budget(12) = 9,
// so l9..l11 failed with ErrBudget. Enlisted first, the list's ids ride in
// one batch, and each late load waits on its id's result.
func TestEnlistedListLateLoadsShareOneCall(t *testing.T) {
	const n = 12
	rec := &recorder{}
	l := New(Options{MaxSize: 100, MaxWait: never}, rec.fetch)
	defer l.Close()
	req := l.Requester(n)
	ids := make([]string, n)
	for k := range ids {
		ids[k] = fmt.Sprint("l", k)
	}
	l.Enlist(context.Background(), req, "g", "", ids)
	for _, id := range ids {
		expireOpen(l, "g") // the window is up before the load comes
		out := make(chan outcome, 1)
		l.LoadThen(context.Background(), req, "g", "", id, func(v string, found bool, err error) {
			out <- outcome{id, v, found, err}
		})
		expireOpen(l, "g")
		if o := recv(t, out); o.err != nil || !o.found || o.v != "v:"+o.id {
			t.Errorf("list id %s: %q found=%v err=%v", o.id, o.v, o.found, o.err)
		}
	}
	if calls, _ := rec.snapshot(); len(calls) != 1 || len(calls[0]) != n {
		t.Errorf("upstream calls %v, want one call of the list's %d ids", calls, n)
	}
}

// TestEnlistedListIsolatedWithinBudget: an enlisted list with bad ids,
// one of its good ids already pending in a one-id request's batch, is
// isolated as a list that joined id by id is: its good ids answered (with
// one bad id), the one-id request answered, and the list within its
// ListBudget(n, max_size) (the shared batch is the one-id request's, not
// the list's).
// Enlist records the list once per id, and its loads do not again.
func TestEnlistedListIsolatedWithinBudget(t *testing.T) {
	for _, tc := range []struct{ n, size, nbad int }{{100, 100, 1}, {100, 50, 3}, {1000, 100, 1000}, {1000, 100, 1}} {
		t.Run(fmt.Sprintf("%d ids max_size %d %d bad", tc.n, tc.size, tc.nbad), func(t *testing.T) {
			g := &gate{bad: map[string]bool{}}
			for i := range tc.nbad {
				g.bad[strconv.Itoa(1+i*(tc.n-1)/tc.nbad)] = true // never id 0
			}
			l := New(Options{MaxSize: tc.size, MaxWait: never}, g.fetch)
			var joined atomic.Int64
			single := make(chan outcome, 1)
			go load(l, joinCtx{context.Background(), &joined}, "shared", "", "0", single)
			waitFor(t, "the one-id request to join", func() bool { return joined.Load() == 1 })
			req := l.Requester(tc.n)
			ids := make([]string, tc.n)
			for i := range ids {
				ids[i] = strconv.Itoa(i)
			}
			l.Enlist(context.Background(), req, "shared", "", ids)
			l.mu.Lock()
			for id, r := range req.enlisted {
				if n := len(r.(*result[string]).reqs); n != 1 {
					t.Errorf("id %s: list recorded %d times", id, n)
				}
			}
			l.mu.Unlock()
			out := make(chan outcome, tc.n)
			for _, id := range ids {
				go func() {
					v, found, err := l.LoadAs(context.Background(), req, "shared", "", id)
					out <- outcome{id, v, found, err}
				}()
			}
			l.Close() // sends the open batches
			failed := 0
			for range tc.n {
				switch o := recv(t, out); {
				case o.err == nil && !g.bad[o.id] && o.v == "v:"+o.id:
				case o.err != nil && g.bad[o.id]:
					failed++
				case o.err != nil && errors.Is(o.err, ErrBudget) && tc.nbad > 1:
					failed++
				default:
					t.Errorf("id %s (bad %v) got (%q, %v, %v)", o.id, g.bad[o.id], o.v, o.found, o.err)
				}
			}
			if o := recv(t, single); o.err != nil || o.v != "v:0" {
				t.Errorf("one-id request: %q %v", o.v, o.err)
			}
			// The one-id request's batch, its retry of id 0, and the list's.
			if calls, b := int(g.calls.Load()), ListBudget(tc.n, tc.size); calls > b+2 {
				t.Errorf("%d calls, over the list's ListBudget(%d, %d) = %d plus the one-id request's 2", calls, tc.n, tc.size, b)
			}
			if tc.nbad == 1 && failed != 1 {
				t.Errorf("%d ids failed, want the bad one only", failed)
			}
		})
	}
}
