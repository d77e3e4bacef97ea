package batch

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// A batch that opens while its group's call is in flight cannot leave
// before that call returns, so its MaxWait's timer would only wake an idle
// process to mark it expired: no timer is set for it. When the call
// returns, a window already up sends the batch at once, and one not up yet
// gets the timer for what is left of it, so no batch leaves sooner than
// MaxWait after it opened, nor later than it would have. Fails on the code
// before: the timer was set for every batch, in flight or not.
func TestNoWindowTimerWhileCallInFlight(t *testing.T) {
	const wait = 300 * time.Millisecond
	for _, tc := range []struct {
		name string
		hold time.Duration // how long the in-flight call is held after the batch opened
	}{
		{"window up when the call returns", wait + 50*time.Millisecond},
		{"window left when the call returns", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGate()
			var joined atomic.Int64
			l := New(Options{MaxSize: 2, MaxWait: wait, MaxInFlight: 1}, g.fetch)
			defer l.Close()
			out := make(chan outcome, 3)
			for _, id := range []string{"a", "b"} { // full: sent at once, held
				go load(l, joinCtx{context.Background(), &joined}, "g", "", id, out)
			}
			waitFor(t, "the first call to start", func() bool { return g.calls.Load() == 1 })
			opened := time.Now()
			go load(l, joinCtx{context.Background(), &joined}, "g", "", "c", out)
			waitFor(t, "c to join", func() bool { return joined.Load() == 3 })

			l.mu.Lock()
			grp := l.groups.get(keyOf("g"))
			armed := grp.timer != nil && grp.timer.Stop()
			if armed {
				grp.timer.Reset(wait) // as it was, near enough
			}
			l.mu.Unlock()
			if armed {
				t.Error("a timer is set for the open batch while the group's call is in flight")
			}

			time.Sleep(tc.hold)
			g.release <- struct{}{} // the first call returns
			for range 2 {
				if o := recv(t, out); o.err != nil || o.v != "v:"+o.id {
					t.Fatalf("got %+v", o)
				}
			}
			g.release <- struct{}{} // c's call, once it starts
			if o := recv(t, out); o.err != nil || o.v != "v:c" {
				t.Fatalf("got %+v", o)
			}
			if since := time.Since(opened); since < wait {
				t.Errorf("c answered %v after its batch opened, before MaxWait %v", since, wait)
			}
			if calls := g.snapshot(); len(calls) != 2 || len(calls[1]) != 1 || calls[1][0] != "c" {
				t.Errorf("calls %v, want [[a b] [c]]", calls)
			}
		})
	}
}
