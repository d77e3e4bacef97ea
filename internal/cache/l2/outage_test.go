package l2

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// TestRedisKilledAndRestarted walks a replica pair through an outage: fast
// failures, the breaker opening, writes that never block, then recovery of
// reads, writes and pub/sub once Redis is back.
func TestRedisKilledAndRestarted(t *testing.T) {
	srv := redistest.Start(t)
	fast := func(o *Options) { o.Timeout = 200 * time.Millisecond }
	a := newReplica(t, []string{srv.Addr()}, fast)
	b := newReplica(t, []string{srv.Addr()}, fast)
	a.waitUp(t)
	b.waitUp(t)
	ctx := context.Background()

	if err := a.Set(ctx, "k", entry("v", time.Minute)); err != nil {
		t.Fatal(err)
	}
	a.flush(t)
	srv.Kill()

	// Failures are fast and, after a few, open the breaker.
	for i := 0; a.Up(); i++ {
		if i > 20 {
			t.Fatal("breaker still closed after 20 failed Gets")
		}
		start := time.Now()
		if _, _, err := a.Get(ctx, "k"); err == nil {
			t.Fatal("Get succeeded with Redis killed")
		}
		if took := time.Since(start); took > time.Second {
			t.Fatalf("failed Get took %s; want about Timeout (200ms)", took)
		}
	}
	if up := a.nextState(t, time.Second); up {
		t.Fatal("OnStateChange(true) while Redis is down")
	}

	// Open breaker: no round trip at all.
	start := time.Now()
	for range 100 {
		if _, _, err := a.Get(ctx, "k"); !errors.Is(err, ErrDown) {
			t.Fatalf("Get with breaker open = %v, want ErrDown", err)
		}
	}
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Fatalf("100 Gets with the breaker open took %s", took)
	}
	for _, f := range []func() error{
		func() error { return a.Delete(ctx, "k") },
		func() error { _, err := a.PurgeAll(ctx); return err },
		func() error { _, _, _, err := a.Lease(ctx, "k", time.Second); return err },
	} {
		if err := f(); !errors.Is(err, ErrDown) {
			t.Fatalf("call with breaker open = %v, want ErrDown", err)
		}
	}

	// An invalidation ignores the breaker (it must reach Redis as soon as
	// Redis answers again), and fails while Redis is down.
	if err := a.InvalidateTags(ctx, "t"); err == nil {
		t.Fatal("InvalidateTags with Redis down succeeded")
	}

	// Set never blocks: on the replica whose breaker is open and on the one
	// that has not noticed yet (its writer fails in the background).
	dropped := a.Stats().Dropped
	start = time.Now()
	e := entry("v", time.Minute)
	for range 2000 {
		_ = a.Set(ctx, "k", e)
		_ = b.Set(ctx, "k", e)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("4000 Sets took %s with Redis down", took)
	}
	if a.Stats().Dropped < dropped+2000 {
		t.Fatalf("dropped %d, want every Set counted", a.Stats().Dropped-dropped)
	}

	srv.Restart()
	if up := a.nextState(t, 10*time.Second); !up {
		t.Fatal("want OnStateChange(true) after restart")
	}

	// Pub/sub resubscribes by itself; the gap is reported as a full
	// invalidation, since messages published meanwhile were lost.
	for _, r := range []*replica{a, b} {
		if inv := r.nextInvalidation(t, 10*time.Second); !inv.All {
			t.Fatalf("first message after the gap = %+v, want All", inv)
		}
		r.waitSubscribed(t)
	}

	// Writes from one replica are read by the other again, and
	// invalidations flow.
	eventually(t, 10*time.Second, func() error {
		if err := a.Set(ctx, "k2", entry("v2", time.Minute, "tag")); err != nil {
			return err
		}
		if err := a.Flush(ctx); err != nil {
			return err
		}
		e, ok, err := b.Get(ctx, "k2")
		if err != nil || !ok || string(e.Body) != "v2" {
			return fmt.Errorf("Get after restart = %v, %v, %v", e, ok, err)
		}
		return nil
	})
	eventually(t, 10*time.Second, func() error { return a.InvalidateTags(ctx, "tag") })
	inv := b.nextInvalidation(t, 2*time.Second)
	if !slices.Equal(inv.Tags, []string{"tag"}) || len(inv.Keys) != 0 {
		t.Fatalf("after restart peer got %+v", inv)
	}
}

// TestSubscriptionSurvivesIdle keeps the channel quiet past the idle check,
// so the subscriber PINGs and must read the PONG without taking it for a
// dead connection (which would report a spurious gap).
func TestSubscriptionSurvivesIdle(t *testing.T) {
	srv := redistest.Start(t)
	a := newReplica(t, []string{srv.Addr()})
	b := newReplica(t, []string{srv.Addr()})

	time.Sleep(2*idleCheck + idleCheck/2)
	if err := a.Delete(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	if inv := b.nextInvalidation(t, time.Second); inv.All || !slices.Equal(inv.Keys, []string{"k"}) {
		t.Fatalf("after an idle spell peer got %+v, want the delete alone; log:\n%s", inv, b.logs)
	}
}

// A store nobody reads from still notices that Redis is gone: the probe
// PINGs while the breaker is closed too.
func TestIdleStoreNoticesOutage(t *testing.T) {
	rs := redistest.Start(t)
	r := newReplica(t, []string{rs.Addr()}, func(o *Options) { o.Timeout = 200 * time.Millisecond })
	rs.Kill()
	select {
	case up := <-r.states:
		if up {
			t.Fatal("state change to up while Redis is dead")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an idle store did not notice Redis was killed within 10s")
	}
	if r.Up() {
		t.Fatal("Up() after the outage was noticed")
	}
	rs.Restart()
	select {
	case up := <-r.states:
		if !up {
			t.Fatal("second state change is not up")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not come back up within 10s of the restart")
	}
}
