package proxy_test

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/proxy"
	"github.com/sidecache/sidecache/internal/route"
)

// heldOrigin is a bulk origin whose first call is held open until the test
// says the load has arrived: the slow first call of a busy upstream, made
// deterministic. Every other call is answered at once.
type heldOrigin struct {
	*bulkOrigin
	seen    atomic.Int64 // ids asked for, over every call
	release chan struct{}
	once    sync.Once
	ready   func(h *heldOrigin) bool
}

func newHeldOrigin(t *testing.T, ready func(h *heldOrigin) bool) *heldOrigin {
	h := &heldOrigin{release: make(chan struct{}), ready: ready}
	var first atomic.Bool
	good := usersAnswer(func(string) bool { return true })
	h.bulkOrigin = newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		h.seen.Add(int64(len(ids)))
		h.check()
		if first.CompareAndSwap(false, true) {
			select {
			case <-h.release:
			case <-time.After(10 * time.Second):
				t.Error("the held first call was never released")
			}
		}
		good(w, r, ids)
	})
	t.Cleanup(func() { h.once.Do(func() { close(h.release) }) })
	return h
}

// check releases the first call once ready says so.
func (h *heldOrigin) check() {
	if h.ready(h) {
		h.once.Do(func() { close(h.release) })
	}
}

// fillLookups counts the lookups a flight makes just before it asks the
// batcher (both tiers, or L2 only when L1 held nothing: LookupShared), so
// a test knows how many requests have got that far.
type fillLookups struct {
	proxy.Cache
	n     *atomic.Int64
	after func()
}

func (c fillLookups) Lookup(ctx context.Context, key string) (*cache.Entry, cache.Tier, error) {
	e, tier, err := c.Cache.Lookup(ctx, key)
	c.n.Add(1)
	c.after()
	return e, tier, err
}

func (c fillLookups) LookupShared(ctx context.Context, key string) (*cache.Entry, cache.Tier, error) {
	e, tier, err := c.Cache.LookupShared(ctx, key)
	c.n.Add(1)
	c.after()
	return e, tier, err
}

// TestBatchWindowFillsUnderLoad: the 500 concurrent cold GETs of
// 500 distinct ids with max_size 100 and max_wait 2ms. While the first bulk
// call is in flight (held until every request has reached the batcher),
// the ids accumulate into full batches instead of leaving every 2ms: at
// most 8 bulk calls (5 is the floor). A window that closes on max_wait
// alone makes one call per 2ms of arrivals.
func TestBatchWindowFillsUnderLoad(t *testing.T) {
	const n, size = 500, 100
	var lookups atomic.Int64
	o := newHeldOrigin(t, func(h *heldOrigin) bool {
		// Every request is at the batcher, and every full batch has left.
		return lookups.Load() >= n && h.seen.Load() >= n-size+1
	})
	e := newEnv(t, o.upstream, []testRoute{userRoute(size, 2*time.Millisecond)}, func(po *proxyOptions, _ *l1.Store) {
		po.Cache = fillLookups{Cache: po.Cache, n: &lookups, after: o.check}
	})
	paths := userPaths(1, n)
	for i, a := range fetchAll(e, paths, nil) {
		id := idOf(paths[i])
		if a.err != nil || a.code != 200 || a.body != userJSON(id, nil) {
			t.Fatalf("id %s: %d %q %v, want its element", id, a.code, a.body, a.err)
		}
	}
	calls := o.snapshot()
	fetched := map[string]int{}
	for _, c := range calls {
		if len(c.ids) > size {
			t.Errorf("a bulk call of %d ids, over max_size %d", len(c.ids), size)
		}
		for _, id := range c.ids {
			fetched[id]++
		}
	}
	t.Logf("%d cold GETs, %d bulk calls", n, len(calls))
	if len(calls) > 8 {
		t.Errorf("%d bulk calls for %d cold GETs, want <= 8", len(calls), n)
	}
	if len(fetched) != n {
		t.Errorf("%d distinct ids fetched, want %d", len(fetched), n)
	}
	for id, c := range fetched {
		if c != 1 {
			t.Errorf("id %s fetched %d times", id, c)
		}
	}
}

// TestSplitLargeListFewCalls: a 1000-id list, all cold, with max_size 100
// and max_wait 2ms, costs about ceil(1000/100) bulk calls however slowly
// its ids reach the batcher: the first call is held until every full batch
// has left, and no partial batch may leave while it is in flight.
func TestSplitLargeListFewCalls(t *testing.T) {
	const n, size = 1000, 100
	o := newHeldOrigin(t, func(h *heldOrigin) bool { return h.seen.Load() >= n-size+1 })
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
	e := newEnv(t, o.upstream, []testRoute{userRoute(size, 2*time.Millisecond), list})
	ids := make([]string, n)
	want := make([]string, n)
	for i := range ids {
		ids[i] = strconv.Itoa(i + 1)
		want[i] = userJSON(ids[i], nil)
	}
	r, b := e.get("/users?ids=" + strings.Join(ids, ","))
	if r.StatusCode != 200 || b != "["+strings.Join(want, ",")+"]" {
		t.Fatalf("status %d, body of %d bytes, want the 1000 elements in order", r.StatusCode, len(b))
	}
	calls := o.snapshot()
	total := 0
	for _, c := range calls {
		total += len(c.ids)
	}
	bound := int(math.Ceil(float64(n)/size)) + 2
	t.Logf("%d ids, %d bulk calls", n, len(calls))
	if len(calls) > bound || total != n {
		t.Errorf("%d bulk calls asking for %d ids, want <= %d calls asking for each of the %d once", len(calls), total, bound, n)
	}
}
