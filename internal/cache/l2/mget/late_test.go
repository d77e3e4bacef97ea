package mget

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l2/late"
	"github.com/sidecache/sidecache/internal/redistest"
)

// The sidecar's lateness is not evidence against Redis
// (internal/cache/l2/late): the pool marks it so (late.Is) and the store's
// breaker does not count it (l2's late_test.go). These tests make the
// sidecar late on purpose and check the mark, never how long anything
// took.

// TestLateBeforeDial: a call whose deadline passed before a connection
// could be dialed fails without dialing and does not count, nor does one
// whose deadline passed before its write on a pooled connection (kept);
// a refused dial counts.
func TestLateBeforeDial(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	p := newLean(t, srv.Addr(), 2)
	past := time.Now().Add(-time.Second)
	err := p.MGet(ctx, time.Now(), past, [3]string{"a"}, nil, func([][]byte) {})
	if err == nil || !late.Is(err) {
		t.Fatalf("mget past its deadline, nothing pooled = %v; want an error not counted", err)
	}
	if n := p.Idle(); n != 0 {
		t.Fatalf("%d idle connections: dialed past the deadline", n)
	}
	if _, err := leanGet(ctx, p, "a"); err != nil { // pools a connection
		t.Fatal(err)
	}
	err = p.MGet(ctx, time.Now(), past, [3]string{"a"}, nil, func([][]byte) {})
	if err == nil || !late.Is(err) {
		t.Fatalf("mget past its deadline on a pooled connection = %v; want an error not counted", err)
	}
	if n := p.Idle(); n != 1 {
		t.Fatalf("%d idle connections after a late write, want the one kept", n)
	}
	if _, err := leanGet(ctx, p, "a"); err != nil {
		t.Fatalf("mget on the kept connection: %v", err)
	}
	srv.Stop()
	p.Close()
	p = newLean(t, srv.Addr(), 2)
	if _, err := leanGet(ctx, p, "a"); err == nil || late.Is(err) {
		t.Fatalf("mget on a stopped Redis = %v; want an error that counts", err)
	}
}

// TestLateDialNotCounted: a dial whose deadline passed while the
// connection was in fact being established (the dialing goroutine late,
// here held before connect until the deadline) does not count; a dial
// refused does (TestLateBeforeDial).
func TestLateDialNotCounted(t *testing.T) {
	srv := redistest.Start(t)
	p := newLean(t, srv.Addr(), 2)
	var armed atomic.Bool
	var dl time.Time
	p.dialer.Control = func(_, _ string, _ syscall.RawConn) error {
		for armed.Load() && time.Now().Before(dl) {
			time.Sleep(time.Until(dl) + time.Millisecond)
		}
		return nil
	}
	armed.Store(true)
	dl = time.Now().Add(200 * time.Millisecond)
	err := p.MGet(context.Background(), time.Now(), dl, [3]string{"a"}, nil, func([][]byte) {})
	if err == nil || !late.Is(err) {
		t.Fatalf("mget whose dial was late = %v; want an error not counted", err)
	}
	armed.Store(false)
	if _, err := leanGet(context.Background(), p, "a"); err != nil {
		t.Fatal(err)
	}
}
