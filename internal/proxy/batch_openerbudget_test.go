package proxy_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l2"
	"github.com/sidecache/sidecache/internal/redistest"
)

// TestBatchStoresDespiteOpenersBudget: a batch is shared by every request
// whose id joins it, so what it stores must not depend on the Redis
// budget (internal/redisbudget) of the one request that opened it. A
// opens a batch while Redis is stopped (SIGSTOP): its L2 read waits out
// redis.timeout, which spends its budget. Redis answers again, and B,
// whose own read is fine, joins A's batch (max_wait is long). The batch
// carried A's context, and l2.Store.Set drops the write of a request
// whose budget is spent: B's element never reached Redis, its lease was
// released with no fill, and the other replica, waiting on it or coming
// later, fetched id 2 again (twice for the cluster, not once: README,
// "a cold ID asked for on several replicas still fetched once per
// cluster"). Counted at the origin, not timed.
func TestBatchStoresDespiteOpenersBudget(t *testing.T) {
	srv := redistest.Start(t)
	counts := &idCounts{n: map[string]*atomic.Int64{}}
	answer := usersAnswer(func(string) bool { return true })
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		counts.add(ids)
		answer(w, r, ids)
	})
	opts := l2.Options{Addrs: []string{srv.Addr()}, Timeout: 100 * time.Millisecond, FailureThreshold: 1000}
	rt := userRoute(100, 2*time.Second) // A's batch stays open for B
	a := newLeaseReplicaOf(t, opts, o.upstream, rt)
	b := newLeaseReplicaOf(t, opts, o.upstream, rt)

	srv.Pause()
	t.Cleanup(srv.Resume)
	gotA := make(chan string, 1)
	go func() { gotA <- a.fetch("/users/1") }()
	time.Sleep(300 * time.Millisecond) // A's read is past redis.timeout: its budget is spent
	srv.Resume()
	if got := a.fetch("/users/2"); !strings.HasPrefix(got, `200 {"id":2`) {
		t.Fatalf("/users/2 = %q", got)
	}
	if got := <-gotA; !strings.HasPrefix(got, `200 {"id":1`) {
		t.Fatalf("/users/1 = %q", got)
	}
	if n := len(o.snapshot()); n != 1 {
		t.Fatalf("%d bulk calls, want A and B in one batch", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.l2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := b.fetch("/users/2"); !strings.HasPrefix(got, `200 {"id":2`) {
		t.Fatalf("/users/2 through the other replica = %q", got)
	}
	if n := counts.of("2"); n != 1 {
		t.Errorf("id 2 fetched %d times, want once for the cluster: the batch B joined stored nothing in L2, as its opener A's Redis budget was spent", n)
	}
}
