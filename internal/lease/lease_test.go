package lease_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l2"
	"github.com/sidecache/sidecache/internal/lease"
	"github.com/sidecache/sidecache/internal/redistest"
)

// replica is one sidecar's shared tier on the test's redis-server.
func replica(t *testing.T, addr string) *l2.Store {
	t.Helper()
	st, err := l2.New(context.Background(), l2.Options{
		Addrs:     []string{addr},
		Prefix:    "lease-test:",
		Timeout:   2 * time.Second, // a loaded machine must not open the breaker
		LeaseHold: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// lookup is a caller's answer func: the entry in st, if there is one.
func lookup(st *l2.Store, key string, calls *atomic.Int64) func(context.Context) (*cache.Entry, bool) {
	return func(ctx context.Context) (*cache.Entry, bool) {
		calls.Add(1)
		e, ok, err := st.Get(ctx, key)
		return e, ok && err == nil
	}
}

type took struct {
	e       *cache.Entry
	ok      bool
	release func(time.Duration)
}

func take(ctx context.Context, st *l2.Store, key string, calls, takeovers *atomic.Int64) <-chan took {
	done := make(chan took, 1)
	go func() {
		e, ok, release := lease.Take(ctx, st, key, 10*time.Second, time.Time{}, lookup(st, key, calls), func() { takeovers.Add(1) })
		done <- took{e, ok, release}
	}()
	return done
}

// leaseHeld reports whether key's lease is held by another replica: st's
// Lease fails to take it (and lets go at once when it does take it).
func leaseHeld(t *testing.T, st *l2.Store, key string) bool {
	t.Helper()
	release, acquired, _, err := st.Lease(context.Background(), key, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if acquired {
		release(0)
	}
	return !acquired
}

// The first miss takes the lease and fetches; a second replica's miss
// waits and is answered by the holder's fill: one upstream call.
func TestWaiterAnsweredByHoldersFill(t *testing.T) {
	srv := redistest.Start(t)
	a, b := replica(t, srv.Addr()), replica(t, srv.Addr())
	ctx := context.Background()
	var aCalls, bCalls, takeovers atomic.Int64

	first := <-take(ctx, a, "k", &aCalls, &takeovers)
	if first.ok || aCalls.Load() != 0 {
		t.Fatalf("holder: ok=%v after %d answer calls; want the lease, no answer asked", first.ok, aCalls.Load())
	}
	waiter := take(ctx, b, "k", &bCalls, &takeovers)
	e := &cache.Entry{Status: 200, Header: http.Header{}, Body: []byte("filled"), StoredAt: time.Now(), TTL: time.Minute, Keep: time.Hour}
	if err := a.Set(ctx, "k", e); err != nil {
		t.Fatal(err)
	}
	first.release(0)
	got := <-waiter
	if !got.ok || got.e == nil || string(got.e.Body) != "filled" {
		t.Fatalf("waiter: ok=%v entry %+v; want the holder's fill", got.ok, got.e)
	}
	got.release(0) // a no-op: the waiter holds nothing
	if takeovers.Load() != 0 {
		t.Fatalf("%d takeovers, want 0", takeovers.Load())
	}
}

// A miss that read L2 before the holder's fill and asks for the lease
// after the holder released it (a replica a beat behind the others, under
// load) takes a lease marked released: it must look again and be answered
// by the fill, not fetch a second time. TestClusterWideCoalescing saw two
// upstream GETs for one key on a loaded machine this way.
func TestLeaseAfterReleaseAnsweredByFill(t *testing.T) {
	srv := redistest.Start(t)
	a, b := replica(t, srv.Addr()), replica(t, srv.Addr())
	ctx := context.Background()
	var aCalls, bCalls, takeovers atomic.Int64
	first := <-take(ctx, a, "k", &aCalls, &takeovers)
	if first.ok {
		t.Fatal("holder got an answer")
	}
	e := &cache.Entry{Status: 200, Header: http.Header{}, Body: []byte("filled"), StoredAt: time.Now(), TTL: time.Minute, Keep: time.Hour}
	if err := a.Set(ctx, "k", e); err != nil {
		t.Fatal(err)
	}
	first.release(0)
	if err := a.Flush(ctx); err != nil { // the fill and the release mark are in Redis
		t.Fatal(err)
	}
	got := <-take(ctx, b, "k", &bCalls, &takeovers)
	if !got.ok || got.e == nil || string(got.e.Body) != "filled" {
		t.Fatalf("late miss: ok=%v entry %+v; want the holder's fill", got.ok, got.e)
	}
	got.release(0)
	if bCalls.Load() != 1 || takeovers.Load() != 0 {
		t.Fatalf("late miss: %d answer calls, %d takeovers; want one look and none", bCalls.Load(), takeovers.Load())
	}
	// Its lease is let go: the next miss of the key (the entry gone
	// stale, say) takes it at once.
	deadline := time.Now().Add(10 * time.Second)
	for leaseHeld(t, a, "k") {
		if time.Now().After(deadline) {
			t.Fatal("the late miss kept the lease it took")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A holder that releases without a fill (its answer was not cacheable)
// leaves every waiter to fetch on its own, with no takeover.
func TestReleasedWithoutFill(t *testing.T) {
	srv := redistest.Start(t)
	a, b := replica(t, srv.Addr()), replica(t, srv.Addr())
	ctx := context.Background()
	var calls, takeovers atomic.Int64
	first := <-take(ctx, a, "k", &calls, &takeovers)
	waiter := take(ctx, b, "k", &calls, &takeovers)
	first.release(0)
	got := <-waiter
	if got.ok || takeovers.Load() != 0 {
		t.Fatalf("waiter: ok=%v, %d takeovers; want a miss of its own and none", got.ok, takeovers.Load())
	}
	got.release(0)
}

// A holder that vanishes stops renewing: its lease lapses, and a waiter
// takes it over (counted) and fetches for the cluster.
func TestHolderGoneTakenOver(t *testing.T) {
	srv := redistest.Start(t)
	a, b, c := replica(t, srv.Addr()), replica(t, srv.Addr()), replica(t, srv.Addr())
	ctx := context.Background()
	var calls, takeovers atomic.Int64
	first := <-take(ctx, a, "k", &calls, &takeovers)
	if first.ok {
		t.Fatal("holder got an answer")
	}
	waiter := take(ctx, b, "k", &calls, &takeovers)
	_ = a.Close() // killed: no renewal, no release
	got := <-waiter
	if got.ok || takeovers.Load() != 1 {
		t.Fatalf("waiter: ok=%v, %d takeovers; want the lease taken over once", got.ok, takeovers.Load())
	}
	if !leaseHeld(t, c, "k") {
		t.Fatal("the waiter does not hold the lease it took over")
	}
	got.release(0)
	deadline := time.Now().Add(10 * time.Second)
	for leaseHeld(t, c, "k") {
		if time.Now().After(deadline) {
			t.Fatal("release did not let the lease go")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An unreachable shared tier is no lease: the caller fetches alone.
func TestTierDownNoLease(t *testing.T) {
	srv := redistest.Start(t)
	a := replica(t, srv.Addr())
	srv.Kill()
	var calls, takeovers atomic.Int64
	got := <-take(context.Background(), a, "k", &calls, &takeovers)
	if got.ok || calls.Load() != 0 || takeovers.Load() != 0 {
		t.Fatalf("ok=%v, %d answer calls, %d takeovers; want a lone fetch", got.ok, calls.Load(), takeovers.Load())
	}
	got.release(0)
}
