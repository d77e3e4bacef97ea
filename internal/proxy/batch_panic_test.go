package proxy_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/proxy"
)

// panicCache panics in Set while on: a fault inside the per-element store
// work of a bulk answer (keepElement, under fetchBulk, on the batch's
// goroutine), as a bug there would.
type panicCache struct {
	proxy.Cache
	on *atomic.Bool
}

func (c panicCache) Set(ctx context.Context, key string, e *cache.Entry) error {
	if c.on.Load() {
		panic("injected: element store")
	}
	return c.Cache.Set(ctx, key, e)
}

// TestBatchPanicSettles: a panic in a batched miss's element work answers
// every waiter of the batch, and of the coalesced flights on its ids, with
// the 502 an upstream failure gives, within the test's deadline (it hung
// to the package timeout once), logs it once with the route, frees the
// group's slots, and leaves the process serving: the next request for the
// same id, the fault off, gets its element.
func TestBatchPanicSettles(t *testing.T) {
	o := newBulkOrigin(t, nil)
	var on atomic.Bool
	on.Store(true)
	logs := &syncBuffer{}
	rt := userRoute(16, 20*time.Millisecond)
	rt.Batch.MaxInFlight = 1
	e := newEnv(t, o.upstream, []testRoute{rt}, func(opt *proxy.Options, _ *l1.Store) {
		opt.Cache = panicCache{Cache: opt.Cache, on: &on}
		opt.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Distinct ids share a batch; the repeated ones coalesce on a flight.
	paths := append(userPaths(1, 4), userPaths(1, 4)...)
	out := make([]answer, len(paths))
	var wg sync.WaitGroup
	for i, p := range paths {
		wg.Go(func() { out[i] = fetch(ctx, e.front.URL+p, nil) })
	}
	wg.Wait()
	n502 := 0
	for i, a := range out {
		switch {
		case a.err != nil:
			t.Errorf("%s: %v (a waiter left hanging)", paths[i], a.err)
		case a.code != http.StatusBadGateway:
			t.Errorf("%s: %d %q, want 502", paths[i], a.code, a.body)
		case strings.Contains(a.body, "injected") || strings.Contains(a.body, `"id"`):
			t.Errorf("%s: 502 body leaks %q", paths[i], a.body)
		default:
			n502++
		}
	}
	if n502 != len(paths) {
		t.Fatalf("%d of %d waiters got their 502", n502, len(paths))
	}
	if c := strings.Count(logs.String(), `msg="batch fetch panicked"`); c != len(o.snapshot()) || c == 0 {
		t.Errorf("panic logged %d times for %d bulk calls:\n%s", c, len(o.snapshot()), logs.String())
	}
	if !strings.Contains(logs.String(), `msg="batch fetch panicked" route=user panic="injected: element store"`) {
		t.Errorf("panic log names no route:\n%s", logs.String())
	}
	if c := strings.Count(logs.String(), "[running]"); c != len(o.snapshot()) {
		t.Errorf("%d stacks logged for %d bulk calls, want one each", c, len(o.snapshot()))
	}
	// The fault off: the group's one slot is free again, and the ids are
	// fetched anew (nothing was stored by the failed batch).
	on.Store(false)
	before := len(o.snapshot())
	a := fetch(ctx, e.front.URL+"/users/1", nil)
	if a.err != nil || a.code != http.StatusOK || a.body != userJSON("1", nil) {
		t.Fatalf("after the fault: %d %q %v, want the element", a.code, a.body, a.err)
	}
	if c := len(o.snapshot()) - before; c != 1 {
		t.Errorf("after the fault: %d bulk calls, want 1", c)
	}
}
