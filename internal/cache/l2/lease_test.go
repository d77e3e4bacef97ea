package l2

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

func TestLeaseOneWinner(t *testing.T) {
	srv := redistest.Start(t)
	replicas := []*replica{newReplica(t, []string{srv.Addr()}), newReplica(t, []string{srv.Addr()})}
	ctx := context.Background()

	var won atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			_, ok, _, err := replicas[i%2].Lease(ctx, "k", 5*time.Second)
			if err != nil {
				t.Error(err)
			}
			if ok {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d of 16 concurrent Lease calls acquired, want 1", won.Load())
	}
}

func TestLeaseReleaseOnlyByHolder(t *testing.T) {
	srv := redistest.Start(t)
	r := newReplica(t, []string{srv.Addr()})
	rc := raw(t, srv.Addr())
	ctx := context.Background()

	releaseOld, ok, released, err := r.Lease(ctx, "k", 30*time.Millisecond)
	if err != nil || !ok || released {
		t.Fatalf("first Lease = %v, %v, released %v; want a free lease", ok, err, released)
	}
	time.Sleep(80 * time.Millisecond) // the first holder's lease expires
	releaseNew, ok, _, err := r.Lease(ctx, "k", 10*time.Second)
	if err != nil || !ok {
		t.Fatalf("Lease after expiry = %v, %v", ok, err)
	}

	releaseOld(0) // a former holder: must not end the new lease
	r.flush(t)
	if v, _ := rc.Get(ctx, "test:l:k").Result(); v == "" || v == releasedMark {
		t.Fatalf("a former holder's release ended the current lease (%q)", v)
	}
	if _, ok, _, _ := r.Lease(ctx, "k", time.Second); ok {
		t.Fatal("lease acquired while held")
	}

	releaseNew(0)
	releaseNew(0) // idempotent
	r.flush(t)
	if v, _ := rc.Get(ctx, "test:l:k").Result(); v != releasedMark {
		t.Fatalf("after the holder's release the lease holds %q, want the release mark", v)
	}
	// The mark is for the holder's waiters: the next miss (the entry went
	// stale, or was not cacheable) takes the lease at once.
	// It says so: the holder's fill may have landed since that miss read
	// the tier (lease.Take looks again).
	if _, ok, released, err := r.Lease(ctx, "k", time.Second); err != nil || !ok || !released {
		t.Fatalf("Lease over a released lease = %v, %v, released %v; want acquired over the mark", ok, err, released)
	}
}

func TestWaitFill(t *testing.T) {
	srv := redistest.Start(t)
	holder := newReplica(t, []string{srv.Addr()})
	waiter := newReplica(t, []string{srv.Addr()})
	ctx := context.Background()

	t.Run("filled", func(t *testing.T) {
		release, ok, _, err := holder.Lease(ctx, "filled", 5*time.Second)
		if err != nil || !ok {
			t.Fatalf("Lease = %v, %v", ok, err)
		}
		if _, ok, _, _ := waiter.Lease(ctx, "filled", 5*time.Second); ok {
			t.Fatal("second replica acquired a held lease")
		}
		go func() {
			time.Sleep(30 * time.Millisecond)
			_ = holder.Set(ctx, "filled", entry("fresh", time.Minute))
			release(0) // queued behind the Set: the waiter must see the entry
		}()
		e, ok, _, err := waiter.WaitFill(ctx, "filled", 5*time.Second, time.Time{})
		if err != nil || !ok || string(e.Body) != "fresh" {
			t.Fatalf("WaitFill = %v, %v, %v", e, ok, err)
		}
	})

	t.Run("released without fill", func(t *testing.T) {
		release, _, _, _ := holder.Lease(ctx, "unfilled", 5*time.Second)
		go func() {
			time.Sleep(30 * time.Millisecond)
			release(0)
		}()
		start := time.Now()
		e, ok, lapsed, err := waiter.WaitFill(ctx, "unfilled", 5*time.Second, time.Time{})
		if err != nil || ok || e != nil || lapsed {
			t.Fatalf("WaitFill = %v, %v, lapsed %v, %v; want a plain miss", e, ok, lapsed, err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("WaitFill waited %s after the lease was released", took)
		}
	})

	t.Run("gives up at max", func(t *testing.T) {
		_, _, _, _ = holder.Lease(ctx, "stuck", 10*time.Second)
		start := time.Now()
		_, ok, _, err := waiter.WaitFill(ctx, "stuck", 100*time.Millisecond, time.Time{})
		took := time.Since(start)
		if err != nil || ok {
			t.Fatalf("WaitFill = %v, %v; want a miss", ok, err)
		}
		if took < 100*time.Millisecond || took > 2*time.Second {
			t.Fatalf("WaitFill returned after %s, want about 100ms", took)
		}
	})

	t.Run("caller gone", func(t *testing.T) {
		_, _, _, _ = holder.Lease(ctx, "stuck2", 10*time.Second)
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, _, _, err := waiter.WaitFill(cctx, "stuck2", 10*time.Second, time.Time{}); err == nil {
			t.Fatal("WaitFill ignored its context")
		}
	})
}
