package coalesce

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// A caller that arrives while a call is in flight does not get that call's
// (older) answer: it waits, and every such caller shares the next call.
// At most one call runs at a time.
func TestOrderedJoinsOnlyLaterCalls(t *testing.T) {
	var g Ordered[int]
	var calls, running, most atomic.Int64
	release := make(chan struct{})
	started := make(chan struct{}, 8)
	fn := func(context.Context) (int, error) {
		n := calls.Add(1)
		if r := running.Add(1); r > most.Load() {
			most.Store(r)
		}
		defer running.Add(-1)
		started <- struct{}{}
		<-release
		return int(n), nil
	}
	first := make(chan int, 1)
	a := g.Arrive()
	go func() {
		v, _, _ := g.Do(context.Background(), "k", a, fn)
		first <- v
	}()
	<-started // call 1 runs
	const n = 5
	var wg sync.WaitGroup
	got := make([]int, n)
	leaders := atomic.Int64{}
	for i := range n {
		arr := g.Arrive() // after call 1 started
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, leader, err := g.Do(context.Background(), "k", arr, fn)
			if err != nil {
				t.Error(err)
			}
			if leader {
				leaders.Add(1)
			}
			got[i] = v
		}()
	}
	close(release)
	wg.Wait()
	if v := <-first; v != 1 {
		t.Fatalf("first caller got call %d", v)
	}
	for i, v := range got {
		if v < 2 {
			t.Errorf("caller %d, arrived after call 1 started, got call %d", i, v)
		}
	}
	if most.Load() != 1 {
		t.Errorf("%d calls ran at once, want 1", most.Load())
	}
	if c := calls.Load(); c > 1+n {
		t.Errorf("%d calls", c)
	}
}

// A caller that arrived before the call in flight started joins it.
func TestOrderedJoinsCallStartedAfterArrival(t *testing.T) {
	var g Ordered[int]
	var calls atomic.Int64
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	fn := func(context.Context) (int, error) {
		calls.Add(1)
		started <- struct{}{}
		<-release
		return 7, nil
	}
	early := g.Arrive()
	go func() { _, _, _ = g.Do(context.Background(), "k", g.Arrive(), fn) }()
	<-started
	done := make(chan int)
	var joined atomic.Int64
	go func() {
		v, leader, _ := g.Do(joinCtx{context.Background(), &joined}, "k", early, fn)
		if leader {
			t.Error("early caller led a second call")
		}
		done <- v
	}()
	waitFor(t, "the early caller waits", func() bool { return joined.Load() > 0 })
	close(release)
	if v := <-done; v != 7 || calls.Load() != 1 {
		t.Fatalf("got %d after %d calls, want the one call's 7", v, calls.Load())
	}
}

// A waiter whose context ends stops waiting; a panic reaches the waiters
// as ErrPanicked and the key is free again.
func TestOrderedCancelAndPanic(t *testing.T) {
	var g Ordered[int]
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := g.Do(ctx, "k", g.Arrive(), func(context.Context) (int, error) { return 1, nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %v", err)
	}
	_, _, err := g.Do(context.Background(), "k", g.Arrive(), func(context.Context) (int, error) { panic("boom") })
	if !errors.Is(err, ErrPanicked) {
		t.Fatalf("panic: %v", err)
	}
	if v, _, err := g.Do(context.Background(), "k", g.Arrive(), func(context.Context) (int, error) { return 3, nil }); v != 3 || err != nil {
		t.Fatalf("after a panic: %d %v", v, err)
	}
}
