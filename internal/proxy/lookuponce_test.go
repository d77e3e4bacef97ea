package proxy_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/proxy"
)

// TestBatchedMissReadsL1Once: a cold batched miss reads L1 once, before it
// joins its flight; the flight's fill, with no flight finished since that
// read, does not read L1 again. Its hit then reads it once more.
func TestBatchedMissReadsL1Once(t *testing.T) {
	o := newBulkOrigin(t, nil)
	var reads [2]atomic.Int64 // L1, L2
	e := newEnv(t, o.upstream, []testRoute{userRoute(10, time.Millisecond)}, func(po *proxy.Options, s *l1.Store) {
		po.Cache = cache.NewTiered(s, nil, cache.TieredOptions{Observe: func(tier cache.Tier, _ cache.Result) {
			if tier == cache.TierL1 {
				reads[0].Add(1)
			} else {
				reads[1].Add(1)
			}
		}})
	})
	a := fetch(context.Background(), e.front.URL+"/users/7", nil)
	if a.err != nil || a.code != 200 || a.body != userJSON("7", nil) || !strings.Contains(a.header.Get("Cache-Status"), "detail=batch") {
		t.Fatalf("cold miss: %d %q %q %v, want a batched miss", a.code, a.header.Get("Cache-Status"), a.body, a.err)
	}
	if n, n2 := reads[0].Load(), reads[1].Load(); n != 1 || n2 != 0 {
		t.Errorf("a cold batched miss read L1 %d times and L2 %d, want once and never (no L2)", n, n2)
	}
	a = fetch(context.Background(), e.front.URL+"/users/7", nil)
	if !strings.Contains(a.header.Get("Cache-Status"), "hit") {
		t.Fatalf("second request: %q, want a hit", a.header.Get("Cache-Status"))
	}
	if n := reads[0].Load(); n != 2 {
		t.Errorf("after the hit: %d L1 reads, want 2", n)
	}
}

// holdFirstLocal holds the first request whose L1 lookup of a key ending
// in suffix found it, right after the lookup, until release is closed.
type holdFirstLocal struct {
	proxy.Cache
	suffix  string
	n       atomic.Int64
	held    chan struct{}
	release chan struct{}
}

func (c *holdFirstLocal) LookupLocal(ctx context.Context, key string) (*cache.Entry, cache.Tier, error) {
	e, tier, err := c.Cache.LookupLocal(ctx, key)
	if strings.HasSuffix(key, c.suffix) && c.n.Add(1) == 1 {
		close(c.held)
		<-c.release
	}
	return e, tier, err
}

// TestLeaderRereadsL1AfterAFlightFinished: a request that found nothing in
// L1, and then leads a flight for its key only after another flight for
// that key stored the answer and finished, reads L1 again in its fill and
// is answered from it: no second bulk call for the id.
func TestLeaderRereadsL1AfterAFlightFinished(t *testing.T) {
	o := newBulkOrigin(t, nil)
	hold := &holdFirstLocal{suffix: "/users/7", held: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, o.upstream, []testRoute{userRoute(10, time.Millisecond)}, func(po *proxy.Options, _ *l1.Store) {
		hold.Cache = po.Cache
		po.Cache = hold
	})
	late := make(chan answer, 1)
	go func() { late <- fetch(context.Background(), e.front.URL+"/users/7", nil) }()
	<-hold.held // the late request has missed L1, and not joined a flight yet
	a := fetch(context.Background(), e.front.URL+"/users/7", nil)
	if a.err != nil || a.code != 200 || !strings.Contains(a.header.Get("Cache-Status"), "detail=batch") {
		t.Fatalf("first request: %d %q %v, want a batched miss", a.code, a.header.Get("Cache-Status"), a.err)
	}
	close(hold.release)
	b := <-late
	if b.err != nil || b.code != 200 || b.body != userJSON("7", nil) {
		t.Fatalf("late request: %d %q %v", b.code, b.body, b.err)
	}
	if cs := b.header.Get("Cache-Status"); !strings.Contains(cs, "hit") {
		t.Errorf("late request: Cache-Status %q, want a hit from the L1 the first flight filled", cs)
	}
	if calls := o.snapshot(); len(calls) != 1 {
		t.Errorf("%d bulk calls, want 1", len(calls))
	}
}
