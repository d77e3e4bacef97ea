package proxy_test

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// TestBatchHostsShareRouteCalls: a client spelling its Host a new way on
// each request makes a batch group per spelling, each allowed
// max_in_flight bulk calls; the route's bulk calls in flight stay within
// max_route_in_flight (unset: four groups' max_in_flight) summed across
// them, and its queued ids within 14 rounds of those calls, past which a
// miss is refused 503 with Retry-After (queue-full). It used to put one
// call per Host in flight at once: 70 spellings, 70 calls.
func TestBatchHostsShareRouteCalls(t *testing.T) {
	const (
		limit = 4 * 1          // batchroute.routeGroups × max_in_flight
		queue = 14 * 1 * limit // batchroute.queuedRounds × max_size × limit
		hosts = limit + queue + 10
	)
	var cur, high atomic.Int64
	entered := make(chan struct{}, hosts)
	release := make(chan struct{})
	ok := usersAnswer(func(string) bool { return true })
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		n := cur.Add(1)
		for h := high.Load(); n > h && !high.CompareAndSwap(h, n); h = high.Load() {
		}
		entered <- struct{}{}
		select {
		case <-release:
		case <-t.Context().Done():
		}
		cur.Add(-1)
		ok(w, r, ids)
	})
	user := userRoute(1, 2*time.Millisecond)
	user.Batch.MaxInFlight = 1
	e := newEnv(t, o.upstream, []testRoute{user})

	type answer struct {
		status     int
		retryAfter string
	}
	answers := make(chan answer, hosts)
	for i := range hosts {
		go func() {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, e.front.URL+"/users/"+strconv.Itoa(i), nil)
			if err != nil {
				answers <- answer{}
				return
			}
			req.Host = "h" + strconv.Itoa(i) + ".example"
			resp, err := client.Do(req)
			if err != nil {
				answers <- answer{}
				return
			}
			resp.Body.Close()
			answers <- answer{resp.StatusCode, resp.Header.Get("Retry-After")}
		}()
	}
	// Before any call is released: limit calls enter, the queue fills, and
	// the misses past it are refused. A call past limit fails the test.
	calls, refused, done := 0, 0, 0
	for calls < limit || refused == 0 {
		select {
		case <-entered:
			if calls++; calls > limit {
				t.Fatalf("%d bulk calls in flight at once for %d Host spellings, want at most %d", calls, hosts, limit)
			}
		case a := <-answers:
			done++
			if a.status != http.StatusServiceUnavailable || a.retryAfter == "" {
				t.Fatalf("an answer before any bulk call returned: status %d, Retry-After %q; want 503 with Retry-After", a.status, a.retryAfter)
			}
			refused++
		case <-time.After(time.Minute):
			t.Fatalf("waited a minute: %d calls in flight, %d refused", calls, refused)
		}
	}
	close(release)
	for ; done < hosts; done++ {
		switch a := await(t, answers); a.status {
		case http.StatusOK:
		case http.StatusServiceUnavailable:
			refused++
		default:
			t.Fatalf("status %d, want 200 or 503", a.status)
		}
	}
	if h := high.Load(); h != limit {
		t.Errorf("most bulk calls in flight at once %d, want %d", h, limit)
	}
	if n := dropped(t, e.reg, "queue-full"); n != float64(refused) || refused > hosts-limit-queue {
		t.Errorf("%d refused, queue-full counted %v; want them equal, at most %d (%d calls and %d queued admitted)", refused, n, hosts-limit-queue, limit, queue)
	}
}
