package proxy_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/route"
)

// hangingBulk is a bulk origin that never answers a call of more than one
// id (until its client gives up: upstream.timeout, or the test closes
// release: the call is then cut) and answers a one-id call at once. It
// counts the calls it got and the held ones that ended.
type hangingBulk struct {
	*bulkOrigin
	ended   atomic.Int64
	release chan struct{}
}

func newHangingBulk(t *testing.T) *hangingBulk {
	h := &hangingBulk{release: make(chan struct{})}
	ok := usersAnswer(func(string) bool { return true })
	h.bulkOrigin = newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		if len(ids) == 1 {
			ok(w, r, ids)
			return
		}
		defer h.ended.Add(1)
		select {
		case <-r.Context().Done():
		case <-t.Context().Done():
		case <-h.release:
			panic(http.ErrAbortHandler) // cut, as a call that timed out
		}
	})
	return h
}

func (h *hangingBulk) calls() int { return len(h.snapshot()) }

// queueEnv is a sidecar with the shipped batch and split defaults
// (max_size 100, max_in_flight 2, max_ids 1000) and upstream.timeout
// timeout, at which each held bulk call ends.
func queueEnv(t *testing.T, o *hangingBulk, timeout time.Duration) *env {
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user", MaxIDs: 1000}}
	user := userRoute(100, 2*time.Millisecond)
	user.Batch.MaxInFlight = 2
	return newEnv(t, o.upstream, []testRoute{user, list}, func(o *proxyOptions, _ *l1.Store) { o.Timeout = timeout })
}

// idsFrom is the list query of n ids from first on.
func idsFrom(first, n int) string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = strconv.Itoa(first + i)
	}
	return "/users?ids=" + strings.Join(ids, ",")
}

// getCtx is a GET through e's front with ctx; a cancelled ctx is a client
// that hung up (its error is not the test's).
func getCtx(ctx context.Context, e *env, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.front.URL+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	return resp, err
}

func dropped(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	return counter(t, reg, "sidecache_batch_dropped_total", "reason", reason)
}

// TestBatchMissBehindListGets504 (prober's h2 D1): a 1,000-id split list
// queues ten bulk calls, two in flight; a one-id miss of the same group
// behind them waits at most its window, upstream.timeout and the call in
// flight ahead of it, and gets 504 like any upstream timeout: at most the
// list's next two calls go out before it is answered. It used to wait its
// turn behind the whole queue (5.8 s at timeout 1 s: eleven calls, the
// eleventh its own). Now it goes ahead of the list's queued calls as the
// first call returns (TestBatchMissNotStarvedByList), and gets 200: with
// its own call, at most five calls go (the list's next two may start
// before its answer is read).
func TestBatchMissBehindListGets504(t *testing.T) {
	o := newHangingBulk(t)
	e := queueEnv(t, o, time.Second)
	listDone := make(chan int, 1)
	go func() {
		r, err := getCtx(t.Context(), e, idsFrom(1000, 1000))
		if err != nil {
			listDone <- 0
			return
		}
		listDone <- r.StatusCode
	}()
	waitUntil(t, "the list's first two calls", func() bool { return o.calls() == 2 })
	r, _ := e.get("/users/5")
	calls := o.calls()
	// 504 when the list's next two calls went out ahead of it (its batch
	// then late); 200 when the list's queued batches were late already
	// as the first two calls ended, and its own then went at once (the
	// origin answers a one-id call).
	if r.StatusCode != http.StatusGatewayTimeout && r.StatusCode != http.StatusOK {
		t.Errorf("GET /users/5 behind the list: status %d, want 504 (or 200)", r.StatusCode)
	}
	if calls > 5 {
		t.Errorf("%d bulk calls before GET /users/5 was answered, want at most 5: it waited behind the queue", calls)
	}
	// The list's first id fails with its batch: 504 whether that was
	// late or one of the calls that timed out.
	if s := await(t, listDone); s != http.StatusGatewayTimeout {
		t.Errorf("the list: status %d, want 504", s)
	}
	if n := o.calls(); n > 5 {
		t.Errorf("%d bulk calls for the list and the miss, want at most 5: its late calls go unsent", n)
	}
	if n := dropped(t, e.reg, "deadline"); n < 1 {
		t.Errorf("sidecache_batch_dropped_total{reason=deadline} = %v, want the late ids counted", n)
	}
}

// TestBatchHungUpListsSendNothing: the queued bulk calls of split lists
// whose clients hung up are dropped unsent: once the two calls in flight
// end, the group is empty and the next miss makes the third call. Six
// such lists used to make sixty calls over thirty seconds, each list's
// queue held (and its memory) until sent.
//
// Deterministic: the calls in flight end when the test cuts them, not at
// upstream.timeout (1 s once, which a loaded machine passed before the
// sidecar had seen every client hang up: a list still live then sent its
// queued calls, and /users/7 shared one); the cut comes once every list's
// handler has returned, its client gone (a list that had not enlisted
// when its client left enlists nothing).
func TestBatchHungUpListsSendNothing(t *testing.T) {
	o := newHangingBulk(t)
	e := queueEnv(t, o, time.Minute)
	var entered, returned atomic.Int64
	front := edgeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered.Add(1)
		defer returned.Add(1)
		e.h.ServeHTTP(w, r)
	}), nil)
	get := func(ctx context.Context, path string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, front.URL+path, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	ctx, hangUp := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			get(ctx, idsFrom(10000*(i+1), 300)) // three calls each
		}()
	}
	waitUntil(t, "the first list's two calls", func() bool { return o.calls() == 2 })
	waitUntil(t, "every list at the sidecar", func() bool { return entered.Load() == 6 })
	hangUp()
	wg.Wait()
	waitUntil(t, "every list's handler to return", func() bool { return returned.Load() == 6 })
	// The list whose calls went had enlisted its 300 ids at once: its
	// third 100 at least were queued, and are dropped.
	waitUntil(t, "the first list's queued ids dropped", func() bool { return dropped(t, e.reg, "abandoned") >= 100 })
	close(o.release)
	waitUntil(t, "the calls in flight to end", func() bool { return o.ended.Load() == 2 })
	r, _ := e.get("/users/7")
	if r.StatusCode != http.StatusOK {
		t.Errorf("GET /users/7 after the lists left: status %d, want 200", r.StatusCode)
	}
	calls := o.snapshot()
	if len(calls) != 3 || len(calls[2].ids) != 1 || calls[2].ids[0] != "7" {
		for i, c := range calls {
			t.Logf("call %d: %d ids, the first %s", i, len(c.ids), c.ids[0])
		}
		t.Errorf("%d bulk calls, want 3 (the two in flight, then /users/7's): the hung-up lists' queued calls went", len(calls))
	}
	t.Logf("ids dropped as abandoned: %v", dropped(t, e.reg, "abandoned"))
}

// TestBatchQueueFullRefused: a group holding fourteen rounds of ids not
// yet sent (14 × max_size × max_in_flight = 2,800) refuses a split list
// that would take the ids lists hold past ¾ of them (2,100) at once, 503 with
// Retry-After, counted (queue-full), while a one-id miss still finds the
// last quarter (its refusal at the whole bound: batch's
// TestQueueFullRefused); a group with nothing queued takes a list of any
// size.
func TestBatchQueueFullRefused(t *testing.T) {
	o := newHangingBulk(t)
	// A long timeout: the queue holds still (nothing sent, nothing late)
	// while the test looks at it.
	e := queueEnv(t, o, 5*time.Second)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // after t.Context's end: the lists hang up
	list := func(first, n int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = getCtx(t.Context(), e, idsFrom(first, n))
		}()
	}
	list(10000, 1000) // 200 in flight, 800 queued
	waitUntil(t, "the first list's two calls", func() bool { return o.calls() == 2 })
	waitUntil(t, "the first list's 800 ids queued", func() bool { return e.h.BatchQueued("user") == 800 })
	list(20000, 1000) // 1,800 queued: a second list of split.max_ids fits
	waitUntil(t, "the second list queued", func() bool { return e.h.BatchQueued("user") == 1800 })
	list(30000, 300) // 2,100 queued: the lists' share
	waitUntil(t, "the third list queued", func() bool { return e.h.BatchQueued("user") == 2100 })
	if r, body := e.get("/users?ids=99"); r.StatusCode != http.StatusServiceUnavailable || body != "upstream busy\n" || r.Header.Get("Retry-After") != "5" {
		t.Errorf("a list past the lists' share: status %d, body %q, Retry-After %q, want 503, upstream busy, 5", r.StatusCode, body, r.Header.Get("Retry-After"))
	}
	// The miss is queued, not refused: it waits for a call to return
	// (5 s), and its client gives up first.
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if r, err := getCtx(ctx, e, "/users/5"); err == nil {
		t.Errorf("GET /users/5 with the misses' quarter free: status %d, Retry-After %q, want it queued", r.StatusCode, r.Header.Get("Retry-After"))
	}
	if n := o.calls(); n != 2 {
		t.Errorf("%d bulk calls, want the first list's 2", n)
	}
	if n := dropped(t, e.reg, "queue-full"); n != 1 {
		t.Errorf("sidecache_batch_dropped_total{reason=queue-full} = %v, want the refused list's one id counted", n)
	}
}

// waitUntil polls cond for up to a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
