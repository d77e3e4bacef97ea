package server_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// TestSlowRedisCostsARequestOneTimeout: Redis answers each command in
// 160 ms (80 ms each way), under l2.redis.timeout (200 ms), so no call
// fails. A miss used to wait on its L2 read and then on its lease, each
// under a timeout of its own, and paid two round trips (the prober's 185
// ms miss at 45 ms each way and a 100 ms timeout; a write 295 ms). Now
// every call the request waits on shares one budget of the timeout: at
// this speed one round trip fits it, the lease asked with what is left is
// cut, the request goes on to the upstream without Redis, and once the
// budget is spent no command is sent for it (its store is not queued).
// Counted at the wire, not timed.
func TestSlowRedisCostsARequestOneTimeout(t *testing.T) {
	rs := redistest.Start(t)
	slow := startSlowRedis(t, rs.Addr())
	o := newOrigin(t)
	a := startReplica(t, o.URL, l2Block(false, slow.Addr())) // timeout: 200ms

	// Warm the connection pools while Redis is fast, so that no dial (and
	// no HELLO) stands before the commands counted below.
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.get(t, fmt.Sprintf("/clients/%d", 100+i))
		}()
	}
	wg.Wait()

	slow.delay.Store(int64(80 * time.Millisecond))
	slow.watch("/clients/9001")
	gets := o.gets.Load()
	if b, _ := a.get(t, "/clients/9001"); b != body("9001", 0) {
		t.Fatalf("GET /clients/9001 = %q", b)
	}
	if n := o.gets.Load() - gets; n != 1 {
		t.Fatalf("upstream GETs = %d, want 1", n)
	}
	answered := slow.answered.Load()

	// Drain what the miss queued for Redis (its store, its lease's
	// release), fast again: a write's invalidation flushes the queue first.
	slow.delay.Store(0)
	if code, _, _ := a.do(t, http.MethodPatch, "/clients/1"); code != http.StatusOK {
		t.Fatalf("PATCH: %d", code)
	}
	sent := slow.sent.Load()
	t.Logf("commands naming the key: %d sent, %d waited out whole during the request", sent, answered)
	if answered > 1 {
		t.Errorf("the miss waited out %d Redis round trips of 160 ms whole, one after another: more than its one 200 ms budget holds", answered)
	}
	if sent > 2 {
		t.Errorf("%d commands were sent for the miss: after its budget was spent (its read, then its lease cut), the request sent more to Redis", sent)
	}
	if metric(t, a, "sidecache_l2_up") != 1 {
		t.Error("the breaker opened on calls cut by a request's budget, not by Redis missing its timeout")
	}
}
