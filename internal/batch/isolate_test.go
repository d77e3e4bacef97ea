package batch

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// log2ceil is ⌈log₂ n⌉ for n >= 1.
func log2ceil(n int) int { return bits.Len(uint(n - 1)) }

// checkIsolated checks one outcome of a load through a gate with bad ids:
// a good id gets its value, a bad id its own rejection.
func checkIsolated(t *testing.T, o outcome, bad map[string]bool) {
	t.Helper()
	if !bad[o.id] {
		if o.err != nil || !o.found || o.v != "v:"+o.id {
			t.Errorf("good id %s got (%q, %v, %v)", o.id, o.v, o.found, o.err)
		}
		return
	}
	var rej *rejected
	if !errors.As(o.err, &rej) || rej.id != o.id || !errors.Is(o.err, ErrIsolate) || o.found {
		t.Errorf("bad id %s got (%q, %v, %v), want its own rejection", o.id, o.v, o.found, o.err)
	}
}

// callsWith counts, for each id, the calls that held it.
func callsWith(batches [][]string) map[string]int {
	n := map[string]int{}
	for _, b := range batches {
		for _, id := range b {
			n[id]++
		}
	}
	return n
}

// TestIsolationFailsOnlyBadIDs: one full batch of 100 one-id requests,
// some of which the upstream rejects (the whole bulk call answers "400 bad
// id x"). Only the bad ids get an error, each its own; each request's id is
// fetched again alone, so every request costs at most 2 calls (Budget(1))
// and waits one call more, and the batch costs one call per request past
// the first.
func TestIsolationFailsOnlyBadIDs(t *testing.T) {
	const n = 100
	for _, nbad := range []int{0, 1, 2, 7, 50, n} {
		t.Run(fmt.Sprint(nbad, " bad"), func(t *testing.T) {
			g := &gate{bad: map[string]bool{}}
			for i := range nbad {
				g.bad[strconv.Itoa(i*n/nbad)] = true // spread over the batch
			}
			var splits atomic.Int64
			l := New(Options{MaxSize: n, MaxWait: never, OnIsolate: func(int) { splits.Add(1) }}, g.fetch)
			defer l.Close()

			out := make(chan outcome, n)
			for i := range n {
				go load(l, context.Background(), "g", "", strconv.Itoa(i), out)
			}
			for range n {
				checkIsolated(t, recv(t, out), g.bad)
			}
			calls := int(g.calls.Load())
			want := 1
			if nbad > 0 {
				want = 1 + n
			}
			if calls != want {
				t.Errorf("%d calls for %d bad of %d one-id requests, want %d", calls, nbad, n, want)
			}
			for id, c := range callsWith(g.snapshot()) {
				if c > Budget(1) {
					t.Errorf("id %s was in %d calls, over Budget(1) = %d", id, c, Budget(1))
				}
			}
			if p := g.peak.Load(); p > DefaultMaxInFlight {
				t.Errorf("%d calls at once, over MaxInFlight", p)
			}
		})
	}
}

// TestListRequestWithinBudget is issue 20's 1,000 ids that match the
// route's pattern and all fail upstream (plus fewer bad ones): one client
// request of n ids costs at most ListBudget(n, max_size) calls whatever the upstream
// answers, the bad ids get their rejection or ErrBudget, and with one bad
// id every good id still gets its value.
func TestListRequestWithinBudget(t *testing.T) {
	for _, tc := range []struct{ n, size, nbad int }{
		{1000, 100, 1000}, {1000, 1000, 1000}, {1000, 1000, 1}, {100, 100, 1}, {100, 100, 3}, {100, 50, 0},
		// Over max_size, one bad id: it fails one call of max_size ids,
		// and the budget must reach it there (ListBudget).
		{1000, 100, 1}, {100, 10, 1},
	} {
		t.Run(fmt.Sprintf("%d ids max_size %d %d bad", tc.n, tc.size, tc.nbad), func(t *testing.T) {
			g := &gate{bad: map[string]bool{}}
			for i := range tc.nbad {
				g.bad[strconv.Itoa(i*tc.n/tc.nbad)] = true
			}
			var budgeted atomic.Int64
			// MaxWait never: the list's ids fill ⌈n/MaxSize⌉ first calls
			// exactly, as the budget sets aside, however slowly they join.
			l := New(Options{MaxSize: tc.size, MaxWait: never, OnBudget: func(n int) { budgeted.Add(int64(n)) }}, g.fetch)
			defer l.Close()
			req := l.Requester(tc.n)
			out := make(chan outcome, tc.n)
			for i := range tc.n {
				go func(id string) {
					v, found, err := l.LoadAs(context.Background(), req, "g", "", id)
					out <- outcome{id, v, found, err}
				}(strconv.Itoa(i))
			}
			failed := 0
			for range tc.n {
				o := recv(t, out)
				switch {
				case o.err == nil && !g.bad[o.id] && o.v == "v:"+o.id:
				case o.err != nil && g.bad[o.id]:
					failed++
				case o.err != nil && errors.Is(o.err, ErrBudget) && tc.nbad > 1:
					failed++ // a good id in a half the budget could not reach
				default:
					t.Errorf("id %s (bad %v) got (%q, %v, %v)", o.id, g.bad[o.id], o.v, o.found, o.err)
				}
			}
			calls := int(g.calls.Load())
			budget := ListBudget(tc.n, tc.size)
			t.Logf("%d calls (budget %d), %d ids failed, %d for the budget", calls, budget, failed, budgeted.Load())
			if calls > budget {
				t.Errorf("%d calls for one request of %d ids, over ListBudget = %d", calls, tc.n, budget)
			}
			if tc.nbad <= 1 && failed != tc.nbad {
				t.Errorf("%d ids failed, want the %d bad one(s) only", failed, tc.nbad)
			}
		})
	}
}

// TestVictimsOfListAttacker: an attacker's list of bad ids and victims'
// one-id requests share a batch. Every victim gets its value after one
// more call at most; the attacker's list stays within its budget.
func TestVictimsOfListAttacker(t *testing.T) {
	const nbad, victims = 40, 20
	g := &gate{bad: map[string]bool{}}
	l := New(Options{MaxSize: nbad + victims, MaxWait: never}, g.fetch)
	defer l.Close()
	req := l.Requester(nbad)
	out := make(chan outcome, nbad+victims)
	for i := range nbad {
		id := "x" + strconv.Itoa(i)
		g.bad[id] = true
		go func() {
			v, found, err := l.LoadAs(context.Background(), req, "g", "", id)
			out <- outcome{id, v, found, err}
		}()
	}
	for i := range victims {
		go load(l, context.Background(), "g", "", strconv.Itoa(i), out)
	}
	for range nbad + victims {
		if o := recv(t, out); !g.bad[o.id] && (o.err != nil || o.v != "v:"+o.id) {
			t.Errorf("victim %s got (%q, %v)", o.id, o.v, o.err)
		} else if g.bad[o.id] && o.err == nil {
			t.Errorf("bad id %s got %q", o.id, o.v)
		}
	}
	withID := callsWith(g.snapshot())
	attacker := 0
	for _, b := range g.snapshot() {
		if slices.ContainsFunc(b, func(id string) bool { return g.bad[id] }) {
			attacker++
		}
	}
	for i := range victims {
		if c := withID[strconv.Itoa(i)]; c > 2 {
			t.Errorf("victim %d was in %d calls, want at most 2 (one more call for the bad ids)", i, c)
		}
	}
	if attacker > Budget(nbad) {
		t.Errorf("the attacker's list was in %d calls, over Budget(%d) = %d", attacker, nbad, Budget(nbad))
	}
}

// suspectFetch fails every call holding a bad id, and every call while
// down, with a 500-like ErrSuspect error; it counts calls.
type suspectFetch struct {
	bad   map[string]bool
	down  atomic.Bool
	calls atomic.Int64
}

func (f *suspectFetch) fetch(_ context.Context, _ string, ids []string) (map[string]string, error) {
	f.calls.Add(1)
	if f.down.Load() {
		return nil, fmt.Errorf("500: %w", ErrSuspect)
	}
	m := make(map[string]string, len(ids))
	for _, id := range ids {
		if f.bad[id] {
			return nil, fmt.Errorf("500 for %s: %w", id, ErrSuspect)
		}
		m[id] = "v:" + id
	}
	return m, nil
}

// loadBatch loads ids as one-id requests that fill one batch, and returns
// their outcomes.
func loadBatch(t *testing.T, l *Loader[string, string], ids ...string) map[string]outcome {
	t.Helper()
	out := make(chan outcome, len(ids))
	for _, id := range ids {
		go load(l, context.Background(), "g", "", id, out)
	}
	got := map[string]outcome{}
	for range ids {
		o := recv(t, out)
		got[o.id] = o
	}
	return got
}

// TestSuspectIsolatedWhileUp is issue 20's attacker looping on an id the
// upstream answers 500 for: the victims sharing its batch get their values
// (one call more), and the bad id, quarantined, then goes alone, so the
// next batches of victims succeed at the first call.
func TestSuspectIsolatedWhileUp(t *testing.T) {
	f := &suspectFetch{bad: map[string]bool{"99999999999999999999": true}}
	now := time.Unix(1000, 0)
	l := New(Options{MaxSize: 4, MaxWait: never, Quarantine: time.Minute, Now: func() time.Time { return now }}, f.fetch)
	defer l.Close()
	for round := range 3 {
		before := f.calls.Load()
		ids := []string{"99999999999999999999"}
		for i := range 3 {
			ids = append(ids, strconv.Itoa(10*round+i))
		}
		if round > 0 {
			ids[0] = strconv.Itoa(10*round + 9) // the bad id goes alone, below
		}
		got := loadBatch(t, l, ids...)
		for _, id := range ids[1:] {
			if o := got[id]; o.err != nil || o.v != "v:"+id {
				t.Errorf("round %d: victim %s got (%q, %v)", round, id, o.v, o.err)
			}
		}
		if round == 0 {
			if c := f.calls.Load() - before; c != 1+4 {
				t.Errorf("round 0: %d calls, want 1 + one per request", c)
			}
		} else if c := f.calls.Load() - before; c != 1 {
			t.Errorf("round %d: %d calls for four good ids, want 1", round, c)
		}
		if _, _, err := l.Load(context.Background(), "g", "", "99999999999999999999"); !errors.Is(err, ErrSuspect) {
			t.Fatalf("round %d: the bad id got %v", round, err)
		}
	}
}

// TestSuspectDownUpstream: an upstream that answers 500 to everything gets
// one round of retries (one per request), then none until it answers.
func TestSuspectDownUpstream(t *testing.T) {
	f := &suspectFetch{}
	f.down.Store(true)
	l := New(Options{MaxSize: 4, MaxWait: never, Quarantine: time.Minute}, f.fetch)
	defer l.Close()
	for _, o := range loadBatch(t, l, "1", "2", "3", "4") {
		if !errors.Is(o.err, ErrSuspect) {
			t.Fatalf("%s got (%q, %v) from a down upstream", o.id, o.v, o.err)
		}
	}
	if c := f.calls.Load(); c != 5 {
		t.Errorf("%d calls for the first batch, want 1 + one round of 4", c)
	}
	loadBatch(t, l, "5", "6", "7", "8")
	if c := f.calls.Load(); c != 10 {
		t.Errorf("%d calls after a second batch, want 10: judged down, still one call per request (never halved), so a victim is never failed by another's id", c)
	}
	f.down.Store(false)
	f.bad = map[string]bool{"12": true}
	loadBatch(t, l, "9", "10", "11", "13") // answered: up again
	got := loadBatch(t, l, "12", "14", "15", "16")
	for _, id := range []string{"14", "15", "16"} {
		if got[id].err != nil {
			t.Errorf("%s got %v once the upstream answered again", id, got[id].err)
		}
	}
}

// TestDownJudgementSparesVictims: two bad ids failing together make a
// round nobody answered — the loader judges the upstream down — yet a
// victim's good id sharing the next call with a bad one still gets its
// value (the harness found this: a good /u/4 answered 502 after two
// attackers' ids failed as a round).
func TestDownJudgementSparesVictims(t *testing.T) {
	f := &suspectFetch{bad: map[string]bool{"90": true, "91": true, "92": true}}
	l := New(Options{MaxSize: 2, MaxWait: never, Quarantine: time.Minute}, f.fetch)
	defer l.Close()
	loadBatch(t, l, "90", "91") // a round of two bad ids: judged down
	got := loadBatch(t, l, "92", "7")
	if o := got["7"]; o.err != nil || o.v != "v:7" {
		t.Errorf("victim 7 got (%q, %v) after two bad ids judged the upstream down", o.v, o.err)
	}
	if got["92"].err == nil {
		t.Error("bad id 92 answered")
	}
}

// TestQuarantine: an id that failed alone after failing a shared call is
// fetched alone for Options.Quarantine, then joins batches again; the
// quarantine holds at most MaxQuarantined ids, counting evictions; with
// Quarantine 0 nothing is remembered.
func TestQuarantine(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	var held, evicted atomic.Int64
	g := &gate{bad: map[string]bool{"b1": true, "b2": true, "b3": true}}
	l := New(Options{MaxSize: 2, MaxWait: never, Quarantine: 10 * time.Second, MaxQuarantined: 2, Now: clock,
		OnQuarantine: func(n int) { held.Store(int64(n)) }, OnEvict: func() { evicted.Add(1) }}, g.fetch)
	defer l.Close()
	loadBatch(t, l, "b1", "1")
	if held.Load() != 1 {
		t.Fatalf("%d ids quarantined, want b1", held.Load())
	}
	n := len(g.snapshot())
	if _, _, err := l.Load(context.Background(), "g", "", "b1"); err == nil {
		t.Fatal("b1 answered")
	}
	if calls := g.snapshot()[n:]; len(calls) != 1 || !slices.Equal(calls[0], []string{"b1"}) {
		t.Errorf("quarantined b1 fetched in %v, want one call of its own", calls)
	}
	now = now.Add(11 * time.Second)
	n = len(g.snapshot())
	loadBatch(t, l, "b1", "2")
	if calls := g.snapshot()[n:]; len(calls) != 3 || len(calls[0]) != 2 {
		t.Errorf("after the quarantine b1 fetched in %v, want a shared call, then one each", calls)
	}
	loadBatch(t, l, "b2", "3")
	loadBatch(t, l, "b3", "4")
	if held.Load() != 2 || evicted.Load() != 1 {
		t.Errorf("%d held, %d evicted, want 2 held (the bound) and 1 evicted", held.Load(), evicted.Load())
	}

	g2 := &gate{bad: map[string]bool{"b1": true}}
	l2 := New(Options{MaxSize: 2, MaxWait: never}, g2.fetch)
	defer l2.Close()
	loadBatch(t, l2, "b1", "1")
	loadBatch(t, l2, "b1", "2")
	if c := g2.calls.Load(); c != 6 {
		t.Errorf("%d calls without a quarantine, want 3 per batch", c)
	}
}

// TestNonIsolatableErrorFailsAtOnce: an error that does not wrap ErrIsolate
// (the upstream is down) fails every waiter after one call; one met while
// isolating fails that half without splitting it further.
func TestNonIsolatableErrorFailsAtOnce(t *testing.T) {
	errDown := errors.New("502 upstream down")
	tests := []struct {
		name      string
		fetch     func(ids []string) error
		wantCalls int64
		want      error
	}{
		{"down", func([]string) error { return fmt.Errorf("bulk: %w", errDown) }, 1, errDown},
		{"panic", func([]string) error { panic(fmt.Errorf("%w: boom", ErrIsolate)) }, 1, ErrPanicked},
		{"down while isolating", func(ids []string) error {
			if len(ids) == 8 {
				return fmt.Errorf("%w: %w", ErrIsolate, &rejected{ids[0]})
			}
			return errDown
		}, 9, errDown}, // one retry per one-id request, none after
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int64
			l := New(Options{MaxSize: 8, MaxWait: never}, func(_ context.Context, _ string, ids []string) (map[string]string, error) {
				calls.Add(1)
				return nil, tt.fetch(ids)
			})
			defer l.Close()
			out := make(chan outcome, 8)
			for i := range 8 {
				go load(l, context.Background(), "g", "", strconv.Itoa(i), out)
			}
			for range 8 {
				if o := recv(t, out); !errors.Is(o.err, tt.want) || o.found {
					t.Fatalf("id %s got (%q, %v, %v), want %v", o.id, o.v, o.found, o.err, tt.want)
				}
			}
			if c := calls.Load(); c != tt.wantCalls {
				t.Errorf("%d calls, want %d", c, tt.wantCalls)
			}
		})
	}
}

// TestIsolationAnswersGoodHalfFirst: the good half of a split batch is
// answered while the bad half is still being isolated.
func TestIsolationAnswersGoodHalfFirst(t *testing.T) {
	block := make(chan struct{})
	l := New(Options{MaxSize: 4, MaxWait: never}, func(_ context.Context, _ string, ids []string) (map[string]string, error) {
		for _, id := range ids {
			if id == "bad" {
				if len(ids) == 1 {
					<-block // the bad id's own call is held
				}
				return nil, fmt.Errorf("%w: %w", ErrIsolate, &rejected{id})
			}
		}
		return map[string]string{ids[0]: "v:" + ids[0], ids[len(ids)-1]: "v:" + ids[len(ids)-1]}, nil
	})
	defer l.Close()
	var joined atomic.Int64
	out := make(chan outcome, 4)
	for i, id := range []string{"a", "b", "c", "bad"} {
		go load(l, joinCtx{context.Background(), &joined}, "g", "", id, out)
		waitFor(t, id+" to join", func() bool { return joined.Load() == int64(i+1) })
	}
	for range 3 {
		if o := recv(t, out); o.err != nil || o.v != "v:"+o.id {
			t.Fatalf("got %+v while the bad id is held", o)
		}
	}
	close(block)
	checkIsolated(t, recv(t, out), map[string]bool{"bad": true})
}

// TestSoloSharingListIDGetsOwnCall: a one-id request for a good id joins
// the id while an attacker's list holds it in a batch not yet sent (the
// two share one result). The bulk call fails for the list's bad ids, with
// the upstream up or judged down, and the list's retries are halved until
// its budget is spent. The victim must get its value, in one call more
// than the shared one, never riding (and failing with) the list's
// retries; the list stays within its budget.
//
// It guards the loader's side of the harness's collateral 502 (a good
// GET /u/4 answered upstream-error): a one-id request's result is taken
// out of the shared call at the first split (partitionLocked), and a retry
// is never found by a later Load, so no one-id request can share one. The
// 502 came from the proxy's flight for the key instead (see
// TestBatchListFailureSparesCollapsedVictim in internal/proxy).
func TestSoloSharingListIDGetsOwnCall(t *testing.T) {
	list := []string{"x1", "x2", "x3", "x4", "x5", "x6", "x7", "4"}
	bad := map[string]bool{}
	for _, id := range list[:7] {
		bad[id] = true
	}
	for _, upstream := range []string{"rejects bad ids (400)", "judged down (500)"} {
		t.Run(upstream, func(t *testing.T) {
			g := &gate{bad: bad} // release nil: no call is held
			fetch := g.fetch
			if upstream == "judged down (500)" {
				f := &suspectFetch{bad: map[string]bool{}}
				for id := range bad {
					f.bad[id] = true
				}
				for i := range 9 {
					f.bad["9"+strconv.Itoa(i)] = true
				}
				fetch = func(ctx context.Context, arg string, ids []string) (map[string]string, error) {
					g.mu.Lock()
					g.batches = append(g.batches, slices.Clone(ids))
					g.mu.Unlock()
					return f.fetch(ctx, arg, ids)
				}
			}
			l := New(Options{MaxSize: 9, MaxWait: never}, fetch)
			defer l.Close()
			if upstream == "judged down (500)" {
				// Nine bad ids alone, a round nobody answers: judged down.
				loadBatch(t, l, "90", "91", "92", "93", "94", "95", "96", "97", "98")
			}
			seen := len(g.snapshot())

			var joined atomic.Int64
			req := l.Requester(len(list))
			out := make(chan outcome, len(list))
			for _, id := range list {
				go func() {
					v, found, err := l.LoadAs(joinCtx{context.Background(), &joined}, req, "g", "", id)
					out <- outcome{id, v, found, err}
				}()
			}
			waitFor(t, "the list's ids to join", func() bool { return joined.Load() == int64(len(list)) })
			victims := make(chan outcome, 2)
			go load(l, joinCtx{context.Background(), &joined}, "g", "", "4", victims)
			waitFor(t, "the victim to join", func() bool { return joined.Load() == int64(len(list))+1 })
			go load(l, context.Background(), "g", "", "5", victims) // the ninth id: the batch is full and goes

			for range 2 {
				if o := recv(t, victims); o.err != nil || o.v != "v:"+o.id {
					t.Errorf("victim %s got (%q, %v)", o.id, o.v, o.err)
				}
			}
			for range list {
				if o := recv(t, out); bad[o.id] && o.err == nil {
					t.Errorf("bad id %s answered %q", o.id, o.v)
				}
			}
			mine := g.snapshot()[seen:]
			if withID := callsWith(mine); withID["4"] > 2 || withID["5"] > 2 {
				t.Errorf("victims in %d and %d calls, want at most 2 (one more for the bad ids): %v", withID["4"], withID["5"], mine)
			}
			attacker := 0
			for _, b := range mine {
				if slices.ContainsFunc(b, func(id string) bool { return bad[id] }) {
					attacker++
				}
			}
			if attacker > Budget(len(list)) {
				t.Errorf("the list was in %d calls, over Budget(%d) = %d: %v", attacker, len(list), Budget(len(list)), mine)
			}
		})
	}
}
