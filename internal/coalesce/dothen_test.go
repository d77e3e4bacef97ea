package coalesce

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
)

// goid is the calling goroutine's id, read from its stack header: the
// tests below must tell on which goroutine a step ran.
func goid() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	// "goroutine 123 [running]:..."
	for i := len("goroutine "); i < len(buf); i++ {
		if buf[i] == ' ' {
			return string(buf[len("goroutine "):i])
		}
	}
	return string(buf)
}

// A flight whose first step answers runs on the leader's goroutine, and a
// caller that joins while it runs gets its answer: one call, one leader.
func TestDoThenFirstStepAnswersInline(t *testing.T) {
	var g Group[string]
	var joined, calls atomic.Int64
	started, release := make(chan struct{}), make(chan struct{})
	type ran struct{ leaderG, firstG string }
	leaderOut := make(chan outcome, 1)
	where := make(chan ran, 1)
	go func() {
		me := goid()
		v, l, err := g.DoThen(context.Background(), "k", func(context.Context, *Flight[string]) (string, Next[string], error) {
			calls.Add(1)
			where <- ran{me, goid()}
			close(started)
			<-release
			return "hit", Next[string]{}, nil
		})
		leaderOut <- outcome{v, l, err}
	}()
	<-started
	waiterOut := make(chan outcome, 1)
	go func() {
		v, l, err := g.DoThen(joinCtx{context.Background(), &joined}, "k", func(context.Context, *Flight[string]) (string, Next[string], error) {
			calls.Add(1)
			return "second flight", Next[string]{}, nil
		})
		waiterOut <- outcome{v, l, err}
	}()
	waitFor(t, "the waiter to join", func() bool { return joined.Load() == 1 })
	close(release)
	if w := recv(t, where); w.leaderG != w.firstG {
		t.Errorf("first ran on goroutine %s, the leader is %s", w.firstG, w.leaderG)
	}
	for name, want := range map[string]bool{"leader": true, "waiter": false} {
		ch := leaderOut
		if !want {
			ch = waiterOut
		}
		if o := recv(t, ch); o.err != nil || o.v != "hit" || o.leader != want {
			t.Errorf("%s got (%q, leader=%v, %v), want (hit, %v, nil)", name, o.v, o.leader, o.err, want)
		}
	}
	if c := calls.Load(); c != 1 {
		t.Errorf("%d steps ran, want 1", c)
	}
}

// A first step that does not answer hands the flight to then, on another
// goroutine, which the leader stops waiting for when its ctx ends; the
// flight goes on for the waiter, with the leader's context values.
func TestDoThenLeaderStopsWaitingForThen(t *testing.T) {
	var g Group[string]
	var joined atomic.Int64
	thenStarted, release := make(chan struct{}), make(chan struct{})
	lctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "from-leader"))
	leaderOut := make(chan outcome, 1)
	leaderG := make(chan string, 1)
	thenG := make(chan string, 1)
	go func() {
		leaderG <- goid()
		v, l, err := g.DoThen(lctx, "k", func(context.Context, *Flight[string]) (string, Next[string], error) {
			return "", Next[string]{Then: func(ctx context.Context) (string, error) {
				thenG <- goid()
				close(thenStarted)
				<-release
				if err := ctx.Err(); err != nil {
					return "", err
				}
				return ctx.Value(ctxKey{}).(string), nil
			}}, nil
		})
		leaderOut <- outcome{v, l, err}
	}()
	<-thenStarted
	if l, th := recv(t, leaderG), recv(t, thenG); l == th {
		t.Errorf("then ran on the leader's goroutine %s", l)
	}
	waiterOut := leaderLeavesWaiterStays(t, &g, &joined, cancel, leaderOut)
	close(release)
	if o := recv(t, waiterOut); o.err != nil || o.v != "from-leader" || o.leader {
		t.Errorf("waiter got (%q, leader=%v, %v), want (from-leader, false, nil)", o.v, o.leader, o.err)
	}
}

// A panic in either step is every caller's error, and the key is free for
// the next flight.
func TestDoThenPanicsAreShared(t *testing.T) {
	for _, inThen := range []bool{false, true} {
		var g Group[string]
		boom := func() (string, error) { panic("boom") }
		_, leader, err := g.DoThen(context.Background(), "k", func(context.Context, *Flight[string]) (string, Next[string], error) {
			if inThen {
				return "", Next[string]{Then: func(context.Context) (string, error) { return boom() }}, nil
			}
			s, err := boom()
			return s, Next[string]{}, err
		})
		if !errors.Is(err, ErrPanicked) || !leader {
			t.Errorf("inThen=%v: got (leader=%v, %v), want ErrPanicked", inThen, leader, err)
		}
		v, _, err := g.Do(context.Background(), "k", func(context.Context) (string, error) { return "next", nil })
		if err != nil || v != "next" {
			t.Errorf("inThen=%v: next flight got (%q, %v)", inThen, v, err)
		}
	}
}

// A first step that hands its flight on (Next.Handed) runs on the
// leader's goroutine, and the flight is finished by whoever it was handed
// to: the leader stops waiting at once when its ctx ends, the flight stays
// joinable until Finish, and a waiter gets what Finish gave, with the
// leader's context values.
func TestDoThenHandedFinishedElsewhere(t *testing.T) {
	var g Group[string]
	var joined atomic.Int64
	handed := make(chan *Flight[string], 1)
	laterG := make(chan string, 1)
	lctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "from-leader"))
	leaderOut := make(chan outcome, 1)
	leaderG := make(chan string, 1)
	go func() {
		leaderG <- goid()
		v, l, err := g.DoThen(lctx, "k", func(ctx context.Context, f *Flight[string]) (string, Next[string], error) {
			laterG <- goid()
			if err := ctx.Err(); err != nil {
				t.Errorf("first's ctx ended: %v", err)
			}
			handed <- f
			return "", Next[string]{Handed: true}, nil
		})
		leaderOut <- outcome{v, l, err}
	}()
	f := recv(t, handed)
	if l, lg := recv(t, leaderG), recv(t, laterG); l != lg {
		t.Errorf("first ran on goroutine %s, the leader is %s", lg, l)
	}
	waiterOut := leaderLeavesWaiterStays(t, &g, &joined, cancel, leaderOut)
	select {
	case o := <-waiterOut:
		t.Fatalf("waiter answered before Finish: %+v", o)
	default:
	}
	f.Finish("finished", nil)
	f.Finish("twice", errors.New("ignored")) // only the first Finish counts
	if o := recv(t, waiterOut); o.err != nil || o.v != "finished" || o.leader {
		t.Errorf("waiter got (%q, leader=%v, %v), want (finished, false, nil)", o.v, o.leader, o.err)
	}
	v, leader, err := g.Do(context.Background(), "k", func(context.Context) (string, error) { return "next", nil })
	if err != nil || v != "next" || !leader {
		t.Errorf("after Finish, a new flight got (%q, leader=%v, %v), want (next, true, nil)", v, leader, err)
	}
}

// A flight handed on and finished before first returns (the work failed
// at once) answers the leader like a first step does.
func TestDoThenHandedFinishesInline(t *testing.T) {
	var g Group[string]
	v, leader, err := g.DoThen(context.Background(), "k", func(_ context.Context, f *Flight[string]) (string, Next[string], error) {
		f.Finish("inline", nil)
		return "", Next[string]{Handed: true}, nil
	})
	if err != nil || v != "inline" || !leader {
		t.Errorf("got (%q, leader=%v, %v), want (inline, true, nil)", v, leader, err)
	}
}

// A first step that panics is every caller's error, even if it handed
// the flight on first: that Finish, coming after, changes nothing.
func TestDoThenHandedPanics(t *testing.T) {
	var g Group[string]
	handed := make(chan *Flight[string], 1)
	_, leader, err := g.DoThen(context.Background(), "k", func(_ context.Context, f *Flight[string]) (string, Next[string], error) {
		handed <- f
		panic("boom")
	})
	if !errors.Is(err, ErrPanicked) || !leader {
		t.Errorf("got (leader=%v, %v), want ErrPanicked", leader, err)
	}
	recv(t, handed).Finish("late", nil)
	v, _, err := g.Do(context.Background(), "k", func(context.Context) (string, error) { return "next", nil })
	if err != nil || v != "next" {
		t.Errorf("next flight got (%q, %v)", v, err)
	}
}

// A flight handed on is finished by whoever it was handed to, with the
// leader's context values and no cancellation in first's ctx, as the
// proxy's batched miss hands it to the batch.
func TestDoThenHandedContext(t *testing.T) {
	var g Group[string]
	handed := make(chan *Flight[string], 1)
	var got context.Context
	lctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "from-leader"))
	defer cancel()
	out := make(chan outcome, 1)
	go func() {
		v, l, err := g.DoThen(lctx, "k", func(ctx context.Context, f *Flight[string]) (string, Next[string], error) {
			got = ctx
			handed <- f
			return "", Next[string]{Handed: true}, nil
		})
		out <- outcome{v, l, err}
	}()
	f := recv(t, handed)
	f.Finish("finished", nil)
	if o := recv(t, out); o.err != nil || o.v != "finished" || !o.leader {
		t.Errorf("leader got (%q, leader=%v, %v), want (finished, true, nil)", o.v, o.leader, o.err)
	}
	if v, _ := got.Value(ctxKey{}).(string); v != "from-leader" || got.Done() != nil {
		t.Errorf("first's ctx: value %q, Done %v; want the leader's values, never cancelled", v, got.Done())
	}
}

// leaderLeavesWaiterStays starts a caller that joins the flight of "k",
// waits until it has joined, then ends the leader's ctx (cancel) and
// checks that the leader stops waiting at once with its ctx's error. It
// returns where the joined caller's outcome will come.
func leaderLeavesWaiterStays(t *testing.T, g *Group[string], joined *atomic.Int64, cancel context.CancelFunc, leaderOut <-chan outcome) <-chan outcome {
	t.Helper()
	waiterOut := make(chan outcome, 1)
	go func() {
		v, l, err := g.Do(joinCtx{context.Background(), joined}, "k", func(context.Context) (string, error) { return "second flight", nil })
		waiterOut <- outcome{v, l, err}
	}()
	waitFor(t, "the waiter to join", func() bool { return joined.Load() == 1 })
	cancel()
	if o := recv(t, leaderOut); !errors.Is(o.err, context.Canceled) || !o.leader {
		t.Fatalf("leader got (leader=%v, %v), want (true, context.Canceled)", o.leader, o.err)
	}
	return waiterOut
}

// TestReadyAnswerTakenOverEndedContext: a leader whose flight was
// finished before it waits (a first step that finished it at once) takes the
// answer without a select, even when its ctx ended meanwhile: a select
// on both would pick either at random.
func TestReadyAnswerTakenOverEndedContext(t *testing.T) {
	var g Group[string]
	for i := range 50 {
		ctx, cancel := context.WithCancel(context.Background())
		v, leader, err := g.DoThen(ctx, "k", func(_ context.Context, f *Flight[string]) (string, Next[string], error) {
			cancel()
			f.Finish("answer", nil)
			return "", Next[string]{Handed: true}, nil
		})
		if v != "answer" || !leader || err != nil {
			t.Fatalf("call %d: (%q, %v, %v), want (answer, true, nil)", i, v, leader, err)
		}
	}
}

// TestWaitWithoutDone: a ctx that can never end (Done nil) waits for the
// flight's answer alone.
func TestWaitWithoutDone(t *testing.T) {
	var g Group[string]
	release := make(chan struct{})
	var fl atomic.Pointer[Flight[string]]
	out := make(chan outcome, 1)
	go func() {
		v, l, err := g.DoThen(context.Background(), "k", func(_ context.Context, f *Flight[string]) (string, Next[string], error) {
			fl.Store(f)
			close(release)
			return "", Next[string]{Handed: true}, nil
		})
		out <- outcome{v, l, err}
	}()
	recv(t, release)
	fl.Load().Finish("later", nil)
	if o := recv(t, out); o.v != "later" || !o.leader || o.err != nil {
		t.Fatalf("got %+v, want (later, true, nil)", o)
	}
}

// TestFinishedMovesBeforeANewFlight: a caller that read Finished while a
// flight for its key was running, and then leads the next flight for that
// key, sees the count moved in its first step (the proxy's leader then
// reads L1 again, which the finished flight may have filled).
func TestFinishedMovesBeforeANewFlight(t *testing.T) {
	var g Group[int]
	ctx := context.Background()
	handed := make(chan *Flight[int], 1)
	running := make(chan error, 1)
	go func() {
		v, l, err := g.DoThen(ctx, "k", func(_ context.Context, f *Flight[int]) (int, Next[int], error) {
			handed <- f
			return 0, Next[int]{Handed: true}, nil
		})
		if err == nil && (v != 1 || !l) {
			err = fmt.Errorf("got (%d, leader %v), want (1, true)", v, l)
		}
		running <- err
	}()
	f := <-handed
	before := g.Finished()
	f.Finish(1, nil)
	if err := <-running; err != nil {
		t.Fatalf("first flight: %v", err)
	}
	var seen uint64
	v, leader, err := g.DoThen(ctx, "k", func(context.Context, *Flight[int]) (int, Next[int], error) {
		seen = g.Finished()
		return 2, Next[int]{}, nil
	})
	if v != 2 || !leader || err != nil {
		t.Fatalf("second flight: %d %v %v", v, leader, err)
	}
	if seen != before+1 {
		t.Errorf("Finished in the next flight's first step: %d, want %d", seen, before+1)
	}
	if n := g.Finished(); n != before+2 {
		t.Errorf("Finished after both: %d, want %d", n, before+2)
	}
}
