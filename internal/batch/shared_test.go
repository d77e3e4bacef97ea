package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
)

// loadList loads ids for the list request req in the order given, each
// once the previous one has joined its batch (so the batch's ids, and each
// request's retries, are in that order), and sends their outcomes to out.
func loadList(t *testing.T, l *Loader[string, string], req *Requester, joined *atomic.Int64, out chan<- outcome, ids ...string) {
	t.Helper()
	for _, id := range ids {
		n := joined.Load()
		go func() {
			v, found, err := l.LoadAs(joinCtx{context.Background(), joined}, req, "g", "", id)
			out <- outcome{id, v, found, err}
		}()
		waitFor(t, id+" to join", func() bool { return joined.Load() == n+1 })
	}
}

// suspectGate is a fetch that fails every call holding a bad id, with a
// 400-like ErrIsolate error (or, if suspect, a 500-like ErrSuspect one),
// and records each call.
func suspectGate(g *gate, suspect bool) FetchFunc[string, string] {
	if !suspect {
		return g.fetch
	}
	f := &suspectFetch{bad: g.bad}
	return func(ctx context.Context, arg string, ids []string) (map[string]string, error) {
		g.mu.Lock()
		g.batches = append(g.batches, slices.Clone(ids))
		g.mu.Unlock()
		return f.fetch(ctx, arg, ids)
	}
}

// callsHolding counts the calls holding any of ids.
func callsHolding(batches [][]string, ids ...string) int {
	n := 0
	for _, b := range batches {
		if slices.ContainsFunc(b, func(id string) bool { return slices.Contains(ids, id) }) {
			n++
		}
	}
	return n
}

// TestSharedIDSparesVictimList: an attacker's list [x1..x6, 4] of ids the
// upstream fails on shares the good id 4 with a victim's list [4, a..g] in
// one batch. The shared call fails; the victim's list must still get every
// value, its own ids in one call more than the shared one, while the
// attacker's list fails within Budget(7). The loader used to give the
// shared id to the list with fewer ids in the batch — the attacker's —
// whose halving spent its budget and failed 4 with ErrBudget: the victim's
// list answered 502.
func TestSharedIDSparesVictimList(t *testing.T) {
	attacker := []string{"x1", "x2", "x3", "x4", "x5", "x6", "4"}
	victim := []string{"4", "a", "b", "c", "d", "e", "f", "g"}
	for _, suspect := range []bool{false, true} {
		t.Run(fmt.Sprintf("suspect %v", suspect), func(t *testing.T) {
			g := &gate{bad: map[string]bool{}}
			for _, id := range attacker[:6] {
				g.bad[id] = true
			}
			l := New(Options{MaxSize: 14, MaxWait: never}, suspectGate(g, suspect))
			defer l.Close()
			var joined atomic.Int64
			aout := make(chan outcome, len(attacker))
			vout := make(chan outcome, len(victim))
			loadList(t, l, l.Requester(len(attacker)), &joined, aout, attacker...)
			// The victim's last id fills the batch, which goes.
			loadList(t, l, l.Requester(len(victim)), &joined, vout, victim...)

			for range victim {
				if o := recv(t, vout); o.err != nil || !o.found || o.v != "v:"+o.id {
					t.Errorf("victim's %s got (%q, %v, %v)", o.id, o.v, o.found, o.err)
				}
			}
			for range attacker {
				if o := recv(t, aout); g.bad[o.id] && o.err == nil {
					t.Errorf("bad id %s answered %q", o.id, o.v)
				}
			}
			calls := g.snapshot()
			if n := callsHolding(calls, victim[1:]...); n != 2 {
				t.Errorf("the victim's own ids were in %d calls, want 2 (the shared one and one of its own): %v", n, calls)
			}
			if n := callsHolding(calls, attacker[:6]...); n > Budget(len(attacker)) {
				t.Errorf("the attacker's list was in %d calls, over Budget(%d) = %d: %v", n, len(attacker), Budget(len(attacker)), calls)
			}
		})
	}
}

// TestManySharingListsSpareVictim: twelve attacker lists, each of six bad
// ids and the victim's good id v0, share one batch with the victim's list
// [v0..v7], which joins last (so more lists wait on v0 before the victim
// does than the loader used to remember). The victim's list gets every
// value, costs the upstream two calls (its budget is Budget(8)), and is
// never failed for its budget; each attacker's list stays within its own.
func TestManySharingListsSpareVictim(t *testing.T) {
	const lists = 12
	g := &gate{bad: map[string]bool{}}
	victim := []string{"v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7"}
	attackers := make([][]string, lists)
	for k := range attackers {
		for i := range 6 {
			id := fmt.Sprintf("x%d.%d", k, i)
			g.bad[id] = true
			attackers[k] = append(attackers[k], id)
		}
	}
	var budgeted atomic.Int64
	l := New(Options{MaxSize: lists*6 + len(victim), MaxWait: never, OnBudget: func(n int) { budgeted.Add(int64(n)) }}, g.fetch)
	defer l.Close()
	var joined atomic.Int64
	aout := make(chan outcome, lists*7)
	vout := make(chan outcome, len(victim))
	reqs := make([]*Requester, lists)
	for k := range reqs {
		reqs[k] = l.Requester(7)
		loadList(t, l, reqs[k], &joined, aout, attackers[k][0]) // v0 second in each attacker's retries
	}
	for k := range reqs {
		loadList(t, l, reqs[k], &joined, aout, append([]string{"v0"}, attackers[k][1:]...)...)
	}
	vreq := l.Requester(len(victim))
	loadList(t, l, vreq, &joined, vout, victim...)

	for range victim {
		if o := recv(t, vout); o.err != nil || !o.found || o.v != "v:"+o.id {
			t.Errorf("victim's %s got (%q, %v, %v)", o.id, o.v, o.found, o.err)
		}
	}
	for range lists * 7 {
		if o := recv(t, aout); g.bad[o.id] && o.err == nil {
			t.Errorf("bad id %s answered %q", o.id, o.v)
		} else if !g.bad[o.id] && errors.Is(o.err, ErrBudget) {
			t.Errorf("good id %s failed for an attacker's budget: %v", o.id, o.err)
		}
	}
	calls := g.snapshot()
	if n := callsHolding(calls, victim[1:]...); n != 2 {
		t.Errorf("the victim's own ids were in %d calls, want 2 (the shared one and one of its own)", n)
	}
	l.mu.Lock()
	spent := vreq.calls
	l.mu.Unlock()
	if spent > Budget(len(victim)) {
		t.Errorf("the victim's request was charged %d calls, over Budget(%d) = %d", spent, len(victim), Budget(len(victim)))
	}
	for k := range attackers {
		if n := callsHolding(calls, attackers[k]...); n > Budget(7) {
			t.Errorf("attacker %d's list was in %d calls, over Budget(7) = %d", k, n, Budget(7))
		}
	}
	if total := len(calls); total > 1+lists*(Budget(7)-1)+1 {
		t.Errorf("%d calls in all, over one shared call plus each list's budget past it", total)
	}
	t.Logf("%d calls, %d ids failed for a budget", len(calls), budgeted.Load())
}

// TestListJoiningPendingIDsCostsNoBudget: under load a list's ids are
// often already pending, each in another request's batch that goes
// whatever the list does. Joining them causes no upstream call, so it must
// not spend the list's budget. It did: each distinct batch joined was
// counted, so a list of 12 good ids spread over 12 pending batches ran out
// of its Budget(12) = 9 and failed 3 ids with ErrBudget — in `make bench`'s
// batch configuration (200 concurrent lists of 20 ids over 1,000 keys)
// 28,884 list requests of ~29,000 answered 502 with a healthy upstream.
func TestListJoiningPendingIDsCostsNoBudget(t *testing.T) {
	g := newGate()
	l := New(Options{MaxSize: 2, MaxWait: never, MaxInFlight: 1}, g.fetch)
	defer l.Close()
	var joined atomic.Int64
	single := make(chan outcome, 26)
	// 26 one-id requests: 13 full batches of two; the first goes and is
	// held, the other 12 wait, their ids pending.
	for i := range 26 {
		n := joined.Load()
		go load(l, joinCtx{context.Background(), &joined}, "g", "", fmt.Sprint(i), single)
		waitFor(t, fmt.Sprintf("id %d to join", i), func() bool { return joined.Load() == n+1 })
	}
	waitFor(t, "the first batch to go", func() bool { return g.calls.Load() == 1 })
	var list []string
	for i := 2; i < 26; i += 2 {
		list = append(list, fmt.Sprint(i)) // one id of each pending batch
	}
	out := make(chan outcome, len(list))
	loadList(t, l, l.Requester(len(list)), &joined, out, list...)
	close(g.release)
	for range list {
		o := <-out
		if o.err != nil || !o.found || o.v != "v:"+o.id {
			t.Errorf("list id %s: %q found=%v err=%v", o.id, o.v, o.found, o.err)
		}
	}
	for range 26 {
		if o := <-single; o.err != nil {
			t.Errorf("one-id %s: %v", o.id, o.err)
		}
	}
	if n := g.calls.Load(); n != 13 {
		t.Errorf("%d upstream calls, want the 13 batches only", n)
	}
}

// TestSettledRetryNotFetched: a retry whose ids another call answered
// while it was queued costs no upstream call. Lists L1 [s, x] (x bad) and
// L2 [s] share a call, which fails; each list's retry is queued, L1's
// first. L1's [s, x] fails again and is halved, its halves queued behind
// L2's retry, which answers s: the half [s] then holds no id left to ask
// for. One call at a time, so the order is fixed. The loader used to send
// it anyway: 5 upstream calls instead of 4, s in 4 of them.
func TestSettledRetryNotFetched(t *testing.T) {
	g := &gate{bad: map[string]bool{"x": true}}
	l := New(Options{MaxSize: 2, MaxWait: never, MaxInFlight: 1}, g.fetch)
	defer l.Close()
	var joined atomic.Int64
	l1, l2 := l.Requester(2), l.Requester(1)
	out1 := make(chan outcome, 2)
	out2 := make(chan outcome, 1)
	loadList(t, l, l1, &joined, out1, "s")
	loadList(t, l, l2, &joined, out2, "s")
	loadList(t, l, l1, &joined, out1, "x") // fills the batch, which goes
	for range 2 {
		o := recv(t, out1)
		switch {
		case o.id == "s" && (o.err != nil || o.v != "v:s"):
			t.Errorf("L1's s got (%q, %v, %v)", o.v, o.found, o.err)
		case o.id == "x" && o.err == nil:
			t.Errorf("bad id x answered %q", o.v)
		}
	}
	if o := recv(t, out2); o.err != nil || o.v != "v:s" {
		t.Errorf("L2's s got (%q, %v, %v)", o.v, o.found, o.err)
	}
	calls := g.snapshot()
	if n := g.calls.Load(); n != 4 {
		t.Errorf("%d upstream calls, want 4 (shared, L1's retry, L2's retry, x alone): %v", n, calls)
	}
	if n := callsHolding(calls, "s"); n != 3 {
		t.Errorf("s was in %d calls, want 3: %v", n, calls)
	}
}
