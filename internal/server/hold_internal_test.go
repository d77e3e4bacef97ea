package server

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// A held write whose tag the replay gave up (Redis answers but refuses the
// tag's epoch, maxTries times) was never published: its answer must not
// pass for published. It is answered with the error and counted late,
// like a write answered past write_hold.
func TestHeldWriteOfAbandonedTagIsLate(t *testing.T) {
	v, reg, _ := replayFixture(t)
	v.held.hold = 1 << 62 // no deadline: only the replay releases it
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- v.InvalidateTags(ctx, "client:1") }()
	for v.pendingCount() == 0 { // the writer's first attempt failed and queued its tag
		select {
		case err := <-done:
			t.Fatalf("write answered before its tag was queued: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	log := slog.New(slog.DiscardHandler)
	for flushes := 0; v.pendingCount() > 0; flushes++ {
		if flushes > 10*maxTries {
			t.Fatalf("tag still pending after %d replays", flushes)
		}
		v.flush(ctx, log)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a write whose invalidation was given up was answered as published")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("write still held after its tag was given up")
	}
	if got := value(t, reg, "sidecache_invalidations_late_total"); got != 1 {
		t.Fatalf("late = %v, want 1", got)
	}
}
