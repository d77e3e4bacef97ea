package connlimit

import (
	"errors"
	"sync/atomic"
	"testing"
)

type counts struct{ reaped, waited atomic.Int64 }

func (c *counts) ConnReaped() { c.reaped.Add(1) }
func (c *counts) ConnWaited() { c.waited.Add(1) }

// conn is a connection's side of a slot: closed records its reap.
type conn struct {
	slot    *Slot
	closed  bool
	pending bool // bytes on their way: reap refuses
	// quick: the connection's reader sees the close and gives the slot
	// back before reap returns.
	quick bool
}

func (c *conn) reap() bool {
	if c.pending {
		return false
	}
	c.closed = true
	if c.quick {
		c.slot.Release()
	}
	return true
}

func take(t *testing.T, l *Limiter) *conn {
	t.Helper()
	c := &conn{}
	s, ok := l.Take(c.reap)
	if !ok {
		t.Fatal("Take: no slot")
	}
	c.slot = s
	return c
}

func TestTakeUpToMaxThenOldestIdle(t *testing.T) {
	cnt := &counts{}
	l := New(3, cnt)
	a, b, c := take(t, l), take(t, l), take(t, l)
	if _, ok := l.Take(func() bool { return true }); ok {
		t.Fatal("a fourth slot with three busy")
	}
	c.slot.Idle()
	a.slot.Idle()
	b.slot.Idle()
	b.slot.Busy() // a request came: not reapable
	d := take(t, l)
	if !c.closed || a.closed || b.closed {
		t.Errorf("closed a=%v b=%v c=%v; want c only (the oldest idle)", a.closed, b.closed, c.closed)
	}
	c.slot.Release() // its socket closes: the slot was handed on
	if got := l.Open(); got != 3 {
		t.Errorf("Open = %d, want 3", got)
	}
	e := take(t, l) // a is the idle one left
	if !a.closed || cnt.reaped.Load() != 2 {
		t.Errorf("a closed %v, reaped %d; want true, 2", a.closed, cnt.reaped.Load())
	}
	for _, x := range []*conn{b, d, e} {
		x.slot.Release()
		x.slot.Release() // twice: once
	}
	a.slot.Release()
	if got := l.Open(); got != 0 {
		t.Errorf("Open after all released = %d, want 0", got)
	}
}

func TestPendingIdleIsSkipped(t *testing.T) {
	l := New(2, nil)
	a, b := take(t, l), take(t, l)
	a.slot.Idle()
	b.slot.Idle()
	a.pending = true
	take(t, l)
	if a.closed || !b.closed {
		t.Errorf("a closed %v, b closed %v; want b (a had a request on its way)", a.closed, b.closed)
	}
	if _, ok := l.Take(func() bool { return true }); ok {
		t.Error("a slot with a busy and a new one at max 2")
	}
}

func TestWaitEndsOnIdleReleaseRaiseOrDone(t *testing.T) {
	cnt := &counts{}
	l := New(1, cnt)
	a := take(t, l) // one busy slot of one: no room
	for _, c := range []struct {
		name        string
		free, after func()
	}{
		{"idle", func() { a.slot.Idle() }, func() { a.slot.Busy() }},
		{"release", func() { a.slot.Release() }, func() { a = take(t, l) }},
		{"raise", func() { l.SetMax(2) }, func() {}},
	} {
		cnt.waited.Store(0)
		done := make(chan error, 1)
		go func() { done <- l.Wait(nil) }()
		// The wait blocks (it is counted) before anything frees room.
		for cnt.waited.Load() == 0 {
			select {
			case err := <-done:
				t.Fatalf("%s: Wait returned %v with no room", c.name, err)
			default:
			}
		}
		c.free()
		if err := <-done; err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		c.after()
	}
	take(t, l) // max 2
	stop := make(chan struct{})
	close(stop)
	if err := l.Wait(stop); !errors.Is(err, ErrClosed) {
		t.Errorf("Wait with no room after done: %v, want ErrClosed", err)
	}
}

func TestHijackedIsNeverReaped(t *testing.T) {
	l := New(1, nil)
	a := take(t, l)
	a.slot.Idle()
	a.slot.Busy() // hijacked: the tunnel holds it
	if _, ok := l.Take(func() bool { return true }); ok || a.closed {
		t.Errorf("a slot past the cap (closed the tunnel: %v)", a.closed)
	}
	a.slot.Release()
	take(t, l)
}

// TestReapedReleasedMeanwhile: the reaped connection's reader saw the
// close and gave its slot back before Take looked again: the slot goes
// to the new connection once, and the reap is counted.
func TestReapedReleasedMeanwhile(t *testing.T) {
	cnt := &counts{}
	l := New(1, cnt)
	a := take(t, l)
	a.quick = true
	a.slot.Idle()
	b := take(t, l)
	if !a.closed || cnt.reaped.Load() != 1 || l.Open() != 1 {
		t.Errorf("closed %v, reaped %d, open %d; want true, 1, 1", a.closed, cnt.reaped.Load(), l.Open())
	}
	a.slot.Release()
	b.slot.Release()
	if l.Open() != 0 {
		t.Errorf("open %d after both released, want 0", l.Open())
	}
}
