package coalesce

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// waitTimeout bounds every wait in these tests; it only ever expires when
// the code under test is broken (a hang), so it is generous.
const waitTimeout = 10 * time.Second

// joinCtx counts the callers that reached the wait in Do: Do calls Done only
// in its select, after it has put the caller on the flight. Waiting for
// that count replaces sleeps as the "everyone has joined" signal.
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

type outcome struct {
	v      string
	leader bool
	err    error
}

func TestDoCollapsesConcurrentCallers(t *testing.T) {
	const n = 500
	var g Group[string]
	var calls, joined atomic.Int64
	release := make(chan struct{})
	fn := func(context.Context) (string, error) {
		calls.Add(1)
		<-release
		return "value", nil
	}

	out := make(chan outcome, n)
	for range n {
		go func() {
			ctx := joinCtx{context.Background(), &joined}
			v, leader, err := g.Do(ctx, "k", fn)
			out <- outcome{v, leader, err}
		}()
	}
	waitFor(t, "all callers to join", func() bool { return joined.Load() == n })
	close(release)

	leaders := 0
	for range n {
		o := recv(t, out)
		if o.err != nil || o.v != "value" {
			t.Fatalf("got (%q, %v), want (value, nil)", o.v, o.err)
		}
		if o.leader {
			leaders++
		}
	}
	if c := calls.Load(); c != 1 {
		t.Errorf("fn ran %d times, want 1", c)
	}
	if leaders != 1 {
		t.Errorf("%d leaders, want 1", leaders)
	}
}

func TestCancelledWaiterLeavesFlightGoesOn(t *testing.T) {
	var g Group[string]
	var calls, joined atomic.Int64
	started, release := make(chan struct{}), make(chan struct{})
	fn := func(context.Context) (string, error) {
		calls.Add(1)
		close(started)
		<-release
		return "value", nil
	}

	leaderOut := make(chan outcome, 1)
	go func() {
		v, l, err := g.Do(context.Background(), "k", fn)
		leaderOut <- outcome{v, l, err}
	}()
	<-started

	wctx, cancel := context.WithCancel(context.Background())
	quitterOut := make(chan outcome, 1)
	go func() {
		v, l, err := g.Do(joinCtx{wctx, &joined}, "k", fn)
		quitterOut <- outcome{v, l, err}
	}()
	stayerOut := make(chan outcome, 1)
	go func() {
		v, l, err := g.Do(joinCtx{context.Background(), &joined}, "k", fn)
		stayerOut <- outcome{v, l, err}
	}()
	waitFor(t, "waiters to join", func() bool { return joined.Load() == 2 })

	cancel()
	// fn is still held open: the quitter must come back without it.
	q := recv(t, quitterOut)
	if !errors.Is(q.err, context.Canceled) || q.leader {
		t.Fatalf("quitter got (leader=%v, err=%v), want (false, context.Canceled)", q.leader, q.err)
	}
	select {
	case <-stayerOut:
		t.Fatal("the other waiter returned before fn finished")
	default:
	}

	close(release)
	for name, ch := range map[string]chan outcome{"leader": leaderOut, "stayer": stayerOut} {
		o := recv(t, ch)
		if o.err != nil || o.v != "value" {
			t.Errorf("%s got (%q, %v), want (value, nil)", name, o.v, o.err)
		}
		if o.leader != (name == "leader") {
			t.Errorf("%s: leader=%v", name, o.leader)
		}
	}
	if c := calls.Load(); c != 1 {
		t.Errorf("fn ran %d times, want 1", c)
	}
}

type ctxKey struct{}

func TestLeaderCancelDoesNotCancelFn(t *testing.T) {
	var g Group[string]
	var joined atomic.Int64
	started, release := make(chan struct{}), make(chan struct{})
	fnErr := make(chan error, 1)
	fn := func(ctx context.Context) (string, error) {
		close(started)
		<-release
		fnErr <- ctx.Err()
		return ctx.Value(ctxKey{}).(string), nil
	}

	lctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "from-leader"))
	leaderOut := make(chan outcome, 1)
	go func() {
		v, l, err := g.Do(lctx, "k", fn)
		leaderOut <- outcome{v, l, err}
	}()
	<-started
	waiterOut := make(chan outcome, 1)
	go func() {
		v, l, err := g.Do(joinCtx{context.Background(), &joined}, "k", fn)
		waiterOut <- outcome{v, l, err}
	}()
	waitFor(t, "waiter to join", func() bool { return joined.Load() == 1 })

	cancel()
	lo := recv(t, leaderOut)
	if !errors.Is(lo.err, context.Canceled) || !lo.leader {
		t.Fatalf("leader got (leader=%v, err=%v), want (true, context.Canceled)", lo.leader, lo.err)
	}
	close(release)
	if err := recv(t, fnErr); err != nil {
		t.Errorf("fn's ctx ended with the leader's: %v", err)
	}
	wo := recv(t, waiterOut)
	if wo.err != nil || wo.v != "from-leader" || wo.leader {
		t.Errorf("waiter got (%q, leader=%v, %v), want (from-leader, false, nil)", wo.v, wo.leader, wo.err)
	}
}

func TestErrorsAndPanicsAreShared(t *testing.T) {
	errUpstream := errors.New("upstream down")
	tests := []struct {
		name string
		fn   func() (string, error)
		want []error
	}{
		{"error", func() (string, error) { return "", errUpstream }, []error{errUpstream}},
		{"panic value", func() (string, error) { panic("boom") }, []error{ErrPanicked}},
		{"panic error", func() (string, error) { panic(errUpstream) }, []error{ErrPanicked, errUpstream}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const n = 20
			var g Group[string]
			var calls, joined atomic.Int64
			release := make(chan struct{})
			fn := func(context.Context) (string, error) {
				calls.Add(1)
				<-release
				return tt.fn()
			}
			errs := make(chan error, n)
			for range n {
				go func() {
					_, _, err := g.Do(joinCtx{context.Background(), &joined}, "k", fn)
					errs <- err
				}()
			}
			waitFor(t, "callers to join", func() bool { return joined.Load() == n })
			close(release)
			for range n {
				err := recv(t, errs)
				for _, w := range tt.want {
					if !errors.Is(err, w) {
						t.Fatalf("got %v, want it to wrap %v", err, w)
					}
				}
			}
			if c := calls.Load(); c != 1 {
				t.Errorf("fn ran %d times, want 1", c)
			}
		})
	}
}

func TestKeysAreIndependent(t *testing.T) {
	var g Group[string]
	startedA, releaseA := make(chan struct{}), make(chan struct{})
	aOut := make(chan outcome, 1)
	go func() {
		v, l, err := g.Do(context.Background(), "a", func(context.Context) (string, error) {
			close(startedA)
			<-releaseA
			return "A", nil
		})
		aOut <- outcome{v, l, err}
	}()
	<-startedA

	// "a" is held open; "b" must not wait for it.
	v, leader, err := g.Do(context.Background(), "b", func(context.Context) (string, error) { return "B", nil })
	if err != nil || v != "B" || !leader {
		t.Fatalf("b got (%q, %v, %v), want (B, true, nil)", v, leader, err)
	}
	close(releaseA)
	if o := recv(t, aOut); o.err != nil || o.v != "A" || !o.leader {
		t.Fatalf("a got %+v", o)
	}
}

func TestNoCachingAfterFlight(t *testing.T) {
	var g Group[int]
	var calls atomic.Int64
	fn := func(context.Context) (int, error) { return int(calls.Add(1)), nil }
	for want := 1; want <= 3; want++ {
		v, leader, err := g.Do(context.Background(), "k", fn)
		if err != nil || v != want || !leader {
			t.Fatalf("call %d got (%d, %v, %v)", want, v, leader, err)
		}
	}
}

func TestForgetStartsNewFlight(t *testing.T) {
	var g Group[int]
	var calls atomic.Int64
	started, release := make(chan struct{}), make(chan struct{})
	firstErr := make(chan error, 1)
	go func() {
		v, _, err := g.Do(context.Background(), "k", func(context.Context) (int, error) {
			calls.Add(1)
			close(started)
			<-release
			return 1, nil
		})
		if err == nil && v != 1 {
			err = errors.New("first flight got another flight's value")
		}
		firstErr <- err
	}()
	<-started
	g.Forget("k")
	v, leader, err := g.Do(context.Background(), "k", func(context.Context) (int, error) {
		calls.Add(1)
		return 2, nil
	})
	if err != nil || v != 2 || !leader {
		t.Fatalf("after Forget got (%d, %v, %v), want (2, true, nil)", v, leader, err)
	}
	close(release)
	if err := recv(t, firstErr); err != nil {
		t.Fatalf("first flight: %v", err)
	}
	if c := calls.Load(); c != 2 {
		t.Errorf("fn ran %d times, want 2", c)
	}
}

func TestDoneContextDoesNotStartFlight(t *testing.T) {
	var g Group[int]
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var calls atomic.Int64
	_, leader, err := g.Do(ctx, "k", func(context.Context) (int, error) { calls.Add(1); return 1, nil })
	if !errors.Is(err, context.Canceled) || leader {
		t.Fatalf("got (leader=%v, %v), want (false, context.Canceled)", leader, err)
	}
	if calls.Load() != 0 {
		t.Fatal("fn ran for a caller whose ctx had already ended")
	}
}

func BenchmarkDoContended(b *testing.B) {
	var g Group[int]
	fn := func(context.Context) (int, error) { return 1, nil }
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := g.Do(ctx, "k", fn); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestGoexitIsEveryCallersError: a fn that ends its goroutine with
// runtime.Goexit (t.FailNow) still answers its callers, with an error,
// instead of leaving them to wait for their contexts.
func TestGoexitIsEveryCallersError(t *testing.T) {
	var g Group[int]
	v, leader, err := g.Do(context.Background(), "k", func(context.Context) (int, error) {
		runtime.Goexit()
		return 1, nil
	})
	if err == nil || v != 0 || !leader {
		t.Fatalf("got (%d, %v, %v), want an error to the leader", v, leader, err)
	}
	if v, leader, err := g.Do(context.Background(), "k", func(context.Context) (int, error) { return 2, nil }); v != 2 || !leader || err != nil {
		t.Fatalf("the next flight: (%d, %v, %v), want (2, true, nil)", v, leader, err)
	}
}
