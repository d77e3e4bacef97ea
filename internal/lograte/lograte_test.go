package lograte

import (
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	now := time.Unix(1000, 0)
	l := New(3, time.Second, func() time.Time { return now })
	allowed := 0
	for range 10 {
		if ok, s := l.Allow(); ok {
			allowed++
			if s != 0 {
				t.Errorf("suppressed %d in the first window", s)
			}
		}
	}
	if allowed != 3 {
		t.Fatalf("%d lines allowed in one window, want 3", allowed)
	}
	now = now.Add(time.Second)
	ok, s := l.Allow()
	if !ok || s != 7 {
		t.Errorf("next window: ok=%v suppressed=%d, want true 7", ok, s)
	}
	if ok, s := l.Allow(); !ok || s != 0 {
		t.Errorf("second line of the window: ok=%v suppressed=%d, want true 0", ok, s)
	}
}
