package lease_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/lease"
	"github.com/sidecache/sidecache/internal/redistest"
)

// waitCounter is a replica's lease, counting its WaitFill calls.
type waitCounter struct {
	lease.Leaser
	waits *atomic.Int64
}

func (l waitCounter) WaitFill(ctx context.Context, key string, max time.Duration, newer time.Time) (*cache.Entry, bool, bool, error) {
	l.waits.Add(1)
	return l.Leaser.WaitFill(ctx, key, max, newer)
}

type swept struct {
	e     *cache.Entry
	ok    bool
	claim *lease.Claim[string, string]
}

// A holder of many keys' leases dies and they lapse at one instant: the
// waiters of one Sweep see them lapse on polls of their own, but the
// first takes over every one of them in one round, and the load gets
// them all in one call; each waiter gets its own key's answer from it.
// One key's lease another replica holds (alive) is not taken: its waiter
// gets that holder's fill.
func TestSweepTakesOverALapseTogether(t *testing.T) {
	srv := redistest.Start(t)
	holder, alive, waiter := replica(t, srv.Addr()), replica(t, srv.Addr()), replica(t, srv.Addr())
	ctx := context.Background()
	const n = 12
	var leaseKeys []string
	for i := range n {
		if _, ok, _, err := holder.Lease(ctx, "k"+strconv.Itoa(i), time.Hour); err != nil || !ok {
			t.Fatalf("holder's lease of k%d: %v, %v", i, ok, err)
		}
		leaseKeys = append(leaseKeys, "lease-test:l:k"+strconv.Itoa(i))
	}
	release, ok, _, err := alive.Lease(ctx, "live", time.Hour)
	if err != nil || !ok {
		t.Fatalf("alive's lease: %v, %v", ok, err)
	}

	var mu sync.Mutex
	var loads [][]string
	s := lease.NewSweep(func(ctx context.Context, claims []*lease.Claim[string, string]) {
		var keys []string
		for _, c := range claims {
			keys = append(keys, c.Arg)
		}
		mu.Lock()
		loads = append(loads, keys)
		mu.Unlock()
		for _, c := range claims {
			c.Done("answer of "+c.Arg, 0)
		}
	})
	var waits, calls atomic.Int64
	l := waitCounter{Leaser: waiter, waits: &waits}
	done := make(chan swept, n+1)
	keys := []string{"live"}
	for i := range n {
		keys = append(keys, "k"+strconv.Itoa(i))
	}
	for _, key := range keys {
		go func() {
			e, ok, _, c := lease.TakeIn(ctx, l, s, key, 10*time.Second, time.Time{}, lookup(waiter, key, &calls), nil, func() string { return key })
			done <- swept{e, ok, c}
		}()
	}
	for waits.Load() < n+1 {
		time.Sleep(5 * time.Millisecond)
	}
	_ = holder.Close() // killed: no renewals, no releases
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rc.Close()
	if err := rc.Del(ctx, leaseKeys...).Err(); err != nil {
		t.Fatal(err)
	}
	for range n {
		got := <-done
		if got.claim == nil {
			t.Fatalf("a waiter of the dead holder got ok=%v, no claim; want its lease taken over", got.ok)
		}
		a, err := got.claim.Wait(ctx)
		if err != nil || a != "answer of "+got.claim.Arg {
			t.Errorf("claim of %s answered %q, %v", got.claim.Arg, a, err)
		}
	}
	mu.Lock()
	if len(loads) != 1 || len(loads[0]) != n || slices.Contains(loads[0], "live") {
		t.Errorf("loads %q; want one of the %d lapsed keys, without the live holder's", loads, n)
	}
	mu.Unlock()
	e := &cache.Entry{Status: 200, Header: http.Header{}, Body: []byte("filled"), StoredAt: time.Now(), TTL: time.Minute, Keep: time.Hour}
	if err := alive.Set(ctx, "live", e); err != nil {
		t.Fatal(err)
	}
	release(0)
	if got := <-done; !got.ok || got.claim != nil || string(got.e.Body) != "filled" {
		t.Fatalf("the live holder's waiter: ok=%v claim %v; want its fill", got.ok, got.claim != nil)
	}
}

// A load that panics fails its claims (ErrLoadPanicked) rather than
// leave their waiters waiting, and lets their leases go.
func TestSweepLoadPanics(t *testing.T) {
	srv := redistest.Start(t)
	holder, waiter, other := replica(t, srv.Addr()), replica(t, srv.Addr()), replica(t, srv.Addr())
	ctx := context.Background()
	if _, ok, _, err := holder.Lease(ctx, "k", time.Hour); err != nil || !ok {
		t.Fatalf("holder's lease: %v, %v", ok, err)
	}
	s := lease.NewSweep(func(context.Context, []*lease.Claim[string, string]) { panic("boom") })
	var waits, calls atomic.Int64
	done := make(chan swept, 1)
	go func() {
		e, ok, _, c := lease.TakeIn(ctx, waitCounter{Leaser: waiter, waits: &waits}, s, "k", 10*time.Second, time.Time{}, lookup(waiter, "k", &calls), nil, func() string { return "k" })
		done <- swept{e, ok, c}
	}()
	for waits.Load() < 1 {
		time.Sleep(5 * time.Millisecond)
	}
	_ = holder.Close()
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rc.Close()
	if err := rc.Del(ctx, "lease-test:l:k").Err(); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.claim == nil {
		t.Fatal("no claim; want the lease taken over")
	}
	if _, err := got.claim.Wait(ctx); !errors.Is(err, lease.ErrLoadPanicked) {
		t.Fatalf("claim of a panicked load: %v; want ErrLoadPanicked", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for leaseHeld(t, other, "k") {
		if time.Now().After(deadline) {
			t.Fatal("the failed claim kept its lease")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
