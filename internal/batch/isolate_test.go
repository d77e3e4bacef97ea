package batch

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
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

// TestIsolationFailsOnlyBadIDs: one full batch of 100 ids, some of which
// the upstream rejects (the whole bulk call answers "400 bad id x"). Only
// the bad ids get an error, each its own; the calls stay within the bound
// Load documents.
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
			bound := min(1+2*nbad*log2ceil(n), 2*n-1)
			t.Logf("%d bad of %d: %d calls (bound %d)", nbad, n, calls, bound)
			if calls > bound {
				t.Errorf("%d calls, over the bound %d", calls, bound)
			}
			if s := int(splits.Load()); calls != 1+2*s {
				t.Errorf("%d calls for %d splits, want 1 + 2·splits", calls, s)
			}
			if p := g.peak.Load(); p > DefaultMaxInFlight {
				t.Errorf("%d calls at once, over MaxInFlight", p)
			}
		})
	}
}

// TestIsolationUnderConcurrency is issue 11's mix: clients loading good and
// bad ids at once, batches formed by the window. Every good id gets its
// value, every bad one its own rejection, and the splits stay within
// b·⌈log₂ n⌉ per batch.
func TestIsolationUnderConcurrency(t *testing.T) {
	const good, nbad, size = 400, 40, 100
	g := &gate{bad: map[string]bool{}}
	var splits atomic.Int64
	l := New(Options{MaxSize: size, MaxWait: time.Millisecond, OnIsolate: func(int) { splits.Add(1) }}, g.fetch)
	defer l.Close()

	ids := make([]string, good+nbad)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
		if i%((good+nbad)/nbad) == 0 {
			ids[i] = "x" + ids[i]
			g.bad[ids[i]] = true
		}
	}
	out := make(chan outcome, len(ids))
	for _, id := range ids {
		go load(l, context.Background(), "g", "", id, out)
	}
	for range good + nbad {
		checkIsolated(t, recv(t, out), g.bad)
	}
	if len(g.bad) != nbad {
		t.Fatalf("%d bad ids, want %d", len(g.bad), nbad)
	}
	s, calls := int(splits.Load()), g.calls.Load()
	t.Logf("%d calls, %d splits for %d ids (%d bad)", calls, s, good+nbad, nbad)
	if s > nbad*log2ceil(size) {
		t.Errorf("%d splits, over %d bad · ⌈log₂ %d⌉", s, nbad, size)
	}
	if p := g.peak.Load(); p > DefaultMaxInFlight {
		t.Errorf("%d calls at once, over MaxInFlight", p)
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
		}, 3, errDown},
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
