package l2

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/cache/l2/late"
	"github.com/sidecache/sidecache/internal/redistest"
)

// The lateness rule on go-redis's paths (late.Dialer): a Get of a key
// never read before has no guess, so it runs the read script through
// go-redis, not the lean client. stall (Options.goStall) makes the
// sidecar late there, as late_test.go does on the lean client.

// lateGoReplica is a replica whose go-redis connections run stall, with
// a pooled connection and the read script loaded.
func lateGoReplica(t *testing.T, addr string, timeout time.Duration, stall late.Stall) *replica {
	t.Helper()
	r := newReplica(t, []string{addr}, func(o *Options) {
		o.Timeout = timeout
		o.FailureThreshold = 3
		o.ProbeInterval = 5 * time.Second // as lateReplica: no PING between the calls
		o.goStall = stall
	})
	r.waitUp(t)
	eventually(t, 10*time.Second, func() error { // a miss, by the script
		_, _, err := r.Get(context.Background(), "u")
		return err
	})
	return r
}

// TestGoRedisLateWriteNotCounted: scripted reads whose deadline passed
// before their command was written fail, FailureThreshold+1 times in a
// row, and the breaker stays closed; the same Gets against a stopped
// Redis open it.
func TestGoRedisLateWriteNotCounted(t *testing.T) {
	srv := redistest.Start(t)
	var armed atomic.Bool
	var stalled atomic.Int32
	r := lateGoReplica(t, srv.Addr(), 500*time.Millisecond, func(at late.Stage, nc net.Conn) {
		if at == late.BeforeWrite && armed.Load() {
			stalled.Add(1)
			untilPast(t, at, nc)
		}
	})
	lateGetsNotCounted(t, r, &armed, &stalled, "write")

	srv.Stop()
	opensWithinThreshold(t, r, "against a stopped Redis")
}

// lateGetsNotCounted arms the stall, makes FailureThreshold+1 Gets that
// must fail late at the named stage (write or read) without the breaker
// moving, then disarms it and waits for a Get to succeed again.
func lateGetsNotCounted(t *testing.T, r *replica, armed *atomic.Bool, stalled *atomic.Int32, stage string) {
	t.Helper()
	ctx := context.Background()
	armed.Store(true)
	for i := range r.opts.FailureThreshold + 1 {
		if _, _, err := r.Get(ctx, "u"); err == nil {
			t.Fatalf("Get %d: no error with its deadline passed before the %s", i, stage)
		}
	}
	if n := stalled.Load(); n < int32(r.opts.FailureThreshold+1) {
		t.Fatalf("%d %ss stalled, want at least %d", n, stage, r.opts.FailureThreshold+1)
	}
	noStateChange(t, r, "late "+stage+"s")
	armed.Store(false)
	eventually(t, 10*time.Second, func() error {
		_, _, err := r.Get(ctx, "u")
		return err
	})
}

// opensWithinThreshold makes failing Gets until the breaker opens, which
// must take no more than FailureThreshold of them.
func opensWithinThreshold(t *testing.T, r *replica, why string) {
	t.Helper()
	for i := 0; r.Up(); i++ {
		if i == r.opts.FailureThreshold {
			t.Fatalf("breaker closed after %d failed Gets %s", i, why)
		}
		if _, _, err := r.Get(context.Background(), "u"); err == nil {
			t.Fatalf("Get %d: no error %s", i, why)
		}
	}
}

// TestGoRedisLateReplyNotCounted: a scripted read whose deadline passed
// while its reply was already in the receive buffer fails but does not
// count; reads that time out with nothing received (Redis paused) do.
func TestGoRedisLateReplyNotCounted(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv.Addr())
	var armed atomic.Bool
	var stalled atomic.Int32
	r := lateGoReplica(t, srv.Addr(), 500*time.Millisecond, func(at late.Stage, nc net.Conn) {
		if at == late.BeforeRead && armed.Load() {
			stalled.Add(1)
			for !late.Pending(nc) { // Redis has answered
				time.Sleep(time.Millisecond)
			}
			untilPast(t, at, nc)
		}
	})
	lateGetsNotCounted(t, r, &armed, &stalled, "read")

	if err := rc.Do(context.Background(), "CLIENT", "PAUSE", "60000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	opensWithinThreshold(t, r, "on a paused Redis")
	srv.Kill() // CLIENT UNPAUSE would be paused too
}

// TestGoRedisPoolWaitNotCounted: with every pooled connection held by
// this sidecar's other calls (stalled in their reads), scripted reads
// that time out waiting for one fail with redis.ErrPoolTimeout,
// FailureThreshold+1 times in a row, and the breaker stays closed.
func TestGoRedisPoolWaitNotCounted(t *testing.T) {
	srv := redistest.Start(t)
	var holding atomic.Bool
	var held atomic.Int32
	release := make(chan struct{})
	r := lateGoReplica(t, srv.Addr(), time.Second, func(at late.Stage, nc net.Conn) {
		if at == late.BeforeRead && holding.Load() {
			held.Add(1)
			<-release
		}
	})
	size := r.rdb.(*redis.Client).Options().PoolSize
	holding.Store(true)
	var wg sync.WaitGroup
	for range size { // straight to go-redis: their outcomes are not done's
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = r.rdb.Get(context.Background(), "h").Err()
		}()
	}
	eventually(t, 10*time.Second, func() error {
		if n := held.Load(); int(n) < size {
			return errors.New("connections not all held yet")
		}
		return nil
	})
	ctx := context.Background()
	for i := range r.opts.FailureThreshold + 1 {
		if _, _, err := r.Get(ctx, "u"); !errors.Is(err, redis.ErrPoolTimeout) {
			t.Fatalf("Get %d with all %d connections held = %v; want a pool timeout", i, size, err)
		}
	}
	noStateChange(t, r, "pool waits")
	holding.Store(false)
	close(release)
	wg.Wait()
	eventually(t, 10*time.Second, func() error {
		_, _, err := r.Get(ctx, "u")
		return err
	})
	noStateChange(t, r, "after the holders")
}
