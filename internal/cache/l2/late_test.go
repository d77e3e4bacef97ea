package l2

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/cache/l2/late"
	"github.com/sidecache/sidecache/internal/cache/l2/mget"
	"github.com/sidecache/sidecache/internal/redistest"
)

// The sidecar's lateness is not evidence against Redis (internal/cache/l2/late). These
// tests make the sidecar late on purpose — a stall between the command's
// steps, as CPU starvation makes one — and check the breaker's state by
// counts, never by how long anything took.

// lateReplica is a replica whose L2 hit goes through the lean client with
// a guess for "k" (one MGET per Get), stall set on its pool before the
// pool's first connection.
func lateReplica(t *testing.T, addr string, stall late.Stall) *replica {
	t.Helper()
	r := newReplica(t, []string{addr}, func(o *Options) {
		o.Timeout = 500 * time.Millisecond
		o.FailureThreshold = 3
		// A PING answered between two late calls would reset the count
		// and hide a late call counted: no probe while the test's calls
		// run (about 2 s), one soon enough to bring up a replica whose
		// first PING a loaded machine failed.
		o.ProbeInterval = 5 * time.Second
		o.leanStall = stall
	})
	r.waitUp(t)
	if r.lean == nil {
		t.Fatal("no lean client on a single Redis")
	}
	ctx := context.Background()
	if err := r.Set(ctx, "k", entry("v", time.Hour, "t")); err != nil {
		t.Fatal(err)
	}
	r.flush(t)
	eventually(t, 10*time.Second, func() error { // a hit: the pool has a connection
		_, _, err := r.Get(ctx, "k")
		return err
	})
	return r
}

// untilPast waits until nc's deadline for the step at has passed, as
// net's poller sees it (its timer has fired): the sidecar is late.
func untilPast(t *testing.T, at late.Stage, nc net.Conn) {
	t.Helper()
	rc, err := nc.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	check := rc.Read
	if at == late.BeforeWrite {
		check = rc.Write
	}
	// RawConn's Read and Write fail once the deadline has passed, before
	// calling f; before, f (which does nothing) ends them at once.
	for check(func(uintptr) bool { return true }) == nil {
		time.Sleep(time.Millisecond)
	}
}

// noStateChange fails if the breaker moved.
func noStateChange(t *testing.T, r *replica, what string) {
	t.Helper()
	if !r.Up() || len(r.states) > 0 {
		t.Fatalf("%s: breaker opened (Up %v, %d state changes); lateness is not Redis's failure", what, r.Up(), len(r.states))
	}
}

// TestLateWriteNotCounted: Gets whose deadline passed before the MGET was
// written fail, FailureThreshold+1 times in a row, and the breaker stays
// closed; the connection, which nothing was written on, stays pooled. The
// same count of Gets against a stopped Redis opens it.
func TestLateWriteNotCounted(t *testing.T) {
	srv := redistest.Start(t)
	var armed atomic.Bool
	r := lateReplica(t, srv.Addr(), func(at late.Stage, nc net.Conn) {
		if at == late.BeforeWrite && armed.Load() {
			untilPast(t, at, nc)
		}
	})
	ctx := context.Background()
	armed.Store(true)
	for i := range r.opts.FailureThreshold + 1 {
		if _, _, err := r.Get(ctx, "k"); err == nil {
			t.Fatalf("Get %d: no error with its deadline passed before the write", i)
		}
	}
	noStateChange(t, r, "late writes")
	if n := r.lean.Idle(); n != 1 {
		t.Fatalf("%d idle connections after late writes, want the one kept (nothing was sent on it)", n)
	}
	armed.Store(false)
	if e, ok := r.mustGet(t, "k"); !ok || string(e.Body) != "v" {
		t.Fatalf("Get after late writes = %v, %v; want the entry", e, ok)
	}

	srv.Stop()
	for i := range r.opts.FailureThreshold {
		if _, _, err := r.Get(ctx, "k"); err == nil {
			t.Fatalf("Get %d: no error with Redis stopped", i)
		}
	}
	if r.Up() {
		t.Fatalf("breaker closed after %d failed Gets against a stopped Redis", r.opts.FailureThreshold)
	}
}

// TestLateReplyNotCounted: a read whose deadline passed while the reply
// was already in the socket's receive buffer fails the Get but does not
// count, and the connection is dropped (its late reply would answer the
// next command). A read that times out with nothing received (Redis
// paused) counts as before.
func TestLateReplyNotCounted(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv.Addr())
	var armed atomic.Bool
	var stalled atomic.Int32
	before := 0 // MGETs run before the one stalled; the stall's goroutine only
	r := lateReplica(t, srv.Addr(), func(at late.Stage, nc net.Conn) {
		switch {
		case !armed.Load():
		case at == late.BeforeWrite:
			before = mgetCalls(t, rc)
		case at == late.BeforeRead:
			stalled.Add(1)
			replied(t, rc, before)
			untilPast(t, at, nc)
		}
	})
	ctx := context.Background()
	armed.Store(true)
	for i := range r.opts.FailureThreshold + 1 {
		_, _, err := r.Get(ctx, "k")
		if err == nil {
			t.Fatalf("Get %d: no error with its deadline passed before the read", i)
		}
		if n := r.lean.Idle(); n != 0 {
			t.Fatalf("Get %d: %d idle connections after a late read, want it dropped", i, n)
		}
	}
	if n := stalled.Load(); n != int32(r.opts.FailureThreshold+1) {
		t.Fatalf("%d reads stalled, want %d", n, r.opts.FailureThreshold+1)
	}
	noStateChange(t, r, "late reads")
	armed.Store(false)
	if e, ok := r.mustGet(t, "k"); !ok || string(e.Body) != "v" {
		t.Fatalf("Get after late reads = %v, %v; want the entry", e, ok)
	}

	// Nothing received: Redis's failure.
	if err := rc.Do(ctx, "CLIENT", "PAUSE", "60000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	for i := 0; r.Up(); i++ {
		if i == r.opts.FailureThreshold {
			t.Fatalf("breaker closed after %d reads timed out on a paused Redis", i)
		}
		if _, _, err := r.Get(ctx, "k"); err == nil {
			t.Fatalf("Get %d: no error with Redis paused", i)
		}
	}
	srv.Kill() // a paused Redis would hold up the replica's Close; CLIENT UNPAUSE is paused too
}

// mgetCalls is how many MGETs Redis has run.
func mgetCalls(t *testing.T, rc *redis.Client) int {
	t.Helper()
	info, err := rc.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Error(err)
		return -1
	}
	for _, l := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(l, "cmdstat_mget:calls="); ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}

// replied returns once Redis has run more than before MGETs and written
// the reply: Redis writes a reply before its event loop reads the next
// command, so a PING answered after the count moved was read after that.
func replied(t *testing.T, rc *redis.Client, before int) {
	t.Helper()
	for n := mgetCalls(t, rc); n >= 0 && n <= before; n = mgetCalls(t, rc) {
		time.Sleep(time.Millisecond)
	}
	if err := rc.Ping(context.Background()).Err(); err != nil {
		t.Error(err)
	}
}

// TestNoFreeConnectionNotCounted: Gets that time out waiting for a pooled
// connection held by a healthy caller fail, FailureThreshold+1 times in a
// row, and the breaker stays closed: the holder reports its own outcome.
func TestNoFreeConnectionNotCounted(t *testing.T) {
	srv := redistest.Start(t)
	r := lateReplica(t, srv.Addr(), nil)
	r.lean.Close()
	r.lean = mget.New(leanOptions(r.opts, 1))
	ctx := context.Background()
	hold, held := make(chan struct{}), make(chan error, 1)
	go func() { // the holder
		held <- r.lean.MGet(ctx, time.Now(), time.Now().Add(time.Minute), [3]string{"holder"}, nil, func([][]byte) {
			held <- nil
			<-hold
		})
	}()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for i := range r.opts.FailureThreshold + 1 {
		_, _, err := r.Get(ctx, "k")
		if err == nil || !strings.Contains(err.Error(), "no free connection") {
			t.Fatalf("Get %d with the only connection held = %v; want no free connection", i, err)
		}
	}
	noStateChange(t, r, "no free connection")
	close(hold)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if e, ok := r.mustGet(t, "k"); !ok || string(e.Body) != "v" {
		t.Fatalf("Get after the holder returned = %v, %v; want the entry", e, ok)
	}
}
