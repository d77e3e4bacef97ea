package l2

import (
	"testing"
	"time"
)

// TestRetryDelay: resubscribe attempts back off from retryEvery to
// retryCap, each wait drawn from the upper half of its step.
func TestRetryDelay(t *testing.T) {
	low := func(int64) int64 { return 0 }
	high := func(n int64) int64 { return n - 1 }
	prev := time.Duration(0)
	for n := range 12 {
		lo, hi := retryDelay(n, low), retryDelay(n, high)
		if lo > hi || hi > retryCap || lo < retryEvery/2 || lo < prev {
			t.Fatalf("attempt %d: wait in [%s, %s] after %s", n, lo, hi, prev)
		}
		prev = lo
	}
	if got := retryDelay(20, low); got != retryCap/2 {
		t.Fatalf("capped wait starts at %s, want %s", got, retryCap/2)
	}
	// The subscription dials under its own timeout, not the command's.
	o := Options{Timeout: 100 * time.Millisecond, MaxLag: time.Second}
	if d := subOptions(o).DialTimeout; d <= o.Timeout {
		t.Fatalf("subscription dial timeout %s, not above the command timeout %s", d, o.Timeout)
	}
}
