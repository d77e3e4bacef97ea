package coalesce

import (
	"context"
	"errors"
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
		v, l, err := g.DoThen(context.Background(), "k", func(context.Context) (string, Then[string], error) {
			calls.Add(1)
			where <- ran{me, goid()}
			close(started)
			<-release
			return "hit", nil, nil
		})
		leaderOut <- outcome{v, l, err}
	}()
	<-started
	waiterOut := make(chan outcome, 1)
	go func() {
		v, l, err := g.DoThen(joinCtx{context.Background(), &joined}, "k", func(context.Context) (string, Then[string], error) {
			calls.Add(1)
			return "second flight", nil, nil
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
		v, l, err := g.DoThen(lctx, "k", func(context.Context) (string, Then[string], error) {
			return "", func(ctx context.Context) (string, error) {
				thenG <- goid()
				close(thenStarted)
				<-release
				if err := ctx.Err(); err != nil {
					return "", err
				}
				return ctx.Value(ctxKey{}).(string), nil
			}, nil
		})
		leaderOut <- outcome{v, l, err}
	}()
	<-thenStarted
	if l, th := recv(t, leaderG), recv(t, thenG); l == th {
		t.Errorf("then ran on the leader's goroutine %s", l)
	}
	waiterOut := make(chan outcome, 1)
	go func() {
		v, l, err := g.Do(joinCtx{context.Background(), &joined}, "k", func(context.Context) (string, error) { return "second flight", nil })
		waiterOut <- outcome{v, l, err}
	}()
	waitFor(t, "the waiter to join", func() bool { return joined.Load() == 1 })
	cancel()
	if o := recv(t, leaderOut); !errors.Is(o.err, context.Canceled) || !o.leader {
		t.Fatalf("leader got (leader=%v, %v), want (true, context.Canceled)", o.leader, o.err)
	}
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
		_, leader, err := g.DoThen(context.Background(), "k", func(context.Context) (string, Then[string], error) {
			if inThen {
				return "", func(context.Context) (string, error) { return boom() }, nil
			}
			s, err := boom()
			return s, nil, err
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
