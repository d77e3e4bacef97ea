package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/cache/l2"
	"github.com/sidecache/sidecache/internal/redistest"
)

// leaseHold is the replicas' l2 LeaseHold: how long a lease outlives its
// holder's last renewal. Renewals come every third of it; a second is long
// enough that a renewal goroutine starved by -race on two busy cores does
// not let a live holder's lease lapse (which costs one more upstream call
// and would read as a failure here).
const leaseHold = time.Second

// leaseReplica is one sidecar with a real L1 and a real L2 on a shared
// redis-server, its L2 store doubling as the cluster lease.
type leaseReplica struct {
	*env
	l2       *l2.Store
	l2Misses atomic.Int64 // L2 reads that missed: a flight is on to the lease
}

func newLeaseReplica(t *testing.T, addr string, up *upstream) *leaseReplica {
	t.Helper()
	st, err := l2.New(context.Background(), l2.Options{
		Addrs:     []string{addr},
		Prefix:    "lease:",
		Timeout:   2 * time.Second, // a loaded machine must not open the breaker
		LeaseHold: leaseHold,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r := &leaseReplica{l2: st}
	observe := func(tier cache.Tier, res cache.Result) {
		if tier == cache.TierL2 && res == cache.ResultMiss {
			r.l2Misses.Add(1)
		}
	}
	r.env = newEnv(t, up, []testRoute{clientRoute}, func(o *proxyOptions, l1s *l1.Store) {
		o.Timeout = 10 * time.Second // also lease_ttl: the wait the old code made
		o.Cache = cache.NewTiered(l1s, st, cache.TieredOptions{Observe: observe})
		o.Leaser = st
	})
	return r
}

// fetch is a GET for use off the test goroutine: it reports instead of
// failing the test. Every replica is asked for one Host, as behind one
// Service: the host is part of the cache key.
func (r *leaseReplica) fetch(path string) string {
	req, err := http.NewRequest(http.MethodGet, r.front.URL+path, nil)
	if err != nil {
		return err.Error()
	}
	req.Host = "api.example"
	resp, err := client.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, b)
}

// Cluster-wide coalescing survives a lease holder that vanishes. Replica A
// takes the lease for a cold key and its upstream request blocks; B and C
// wait on the lease. While A lives, its renewals keep the lease for longer
// than several lease holds and the waiters get A's fill: one upstream call.
// When A dies (its L2 closed: no release, no renewals), B and C take the
// lease over, one of them fetches, and all of them answer with the right
// body while A's request is still blocked at the origin: two calls. Before
// leases were renewed and taken over, B and C waited out lease_ttl (the
// upstream timeout) and answered 504.
func TestLeaseHolderGone(t *testing.T) {
	// Upstream calls once the waiters answered: with the holder killed,
	// one of B and C takes over (2); should that one's own renewals be
	// late under load, the other takes over too, and no flight ever makes
	// more than one call of its own (3). What the old code could not do is
	// answer at all while A was blocked.
	cases := []struct {
		name               string
		kill               bool
		minCalls, maxCalls int64
	}{
		{name: "holder alive", kill: false, minCalls: 1, maxCalls: 1},
		{name: "holder killed", kill: true, minCalls: 2, maxCalls: 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := redistest.Start(t)
			gate := make(chan struct{})
			var opened sync.Once
			open := func() { opened.Do(func() { close(gate) }) }
			holding := make(chan struct{})
			var first atomic.Bool
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				if first.CompareAndSwap(false, true) {
					close(holding)
					<-gate
				}
				fmt.Fprintf(w, "item %s", r.URL.Path)
			})
			t.Cleanup(open) // before the origin's Close, which waits for its handlers
			const path = "/clients/9"
			const want = "200 item " + path
			a := newLeaseReplica(t, srv.Addr(), up)
			waiters := []*leaseReplica{newLeaseReplica(t, srv.Addr(), up), newLeaseReplica(t, srv.Addr(), up)}

			aDone := make(chan string, 1)
			go func() { aDone <- a.fetch(path) }()
			<-holding // A holds the lease; its upstream request is blocked

			const perReplica = 3
			answers := make(chan string, perReplica*len(waiters))
			for _, w := range waiters {
				for range perReplica {
					go func() { answers <- w.fetch(path) }()
				}
			}
			for _, w := range waiters {
				for w.l2Misses.Load() == 0 { // its flight is on to the lease
					time.Sleep(time.Millisecond)
				}
			}
			if c.kill {
				_ = a.l2.Close()
			} else {
				time.Sleep(3 * leaseHold) // only renewals keep the lease this long
				if n := up.calls.Load(); n != 1 {
					t.Fatalf("upstream calls while the holder works = %d, want 1", n)
				}
				open()
			}
			for range cap(answers) {
				if got := <-answers; got != want {
					t.Errorf("waiter answered %q, want %q", got, want)
				}
			}
			if n := up.calls.Load(); n < c.minCalls || n > c.maxCalls {
				t.Errorf("upstream calls = %d, want %d..%d", n, c.minCalls, c.maxCalls)
			}
			var takeovers float64
			for _, w := range waiters {
				takeovers += counter(t, w.reg, "sidecache_lease_takeovers_total", "route", "client")
			}
			if lapsed := takeovers > 0; lapsed != c.kill {
				t.Errorf("sidecache_lease_takeovers_total over the waiters = %v, want > 0 only when the holder is killed", takeovers)
			}
			if c.kill {
				select {
				case got := <-aDone:
					t.Fatalf("the holder answered %q before its upstream request was let go", got)
				default:
				}
				open()
			}
			if got := <-aDone; got != want {
				t.Errorf("holder answered %q, want %q", got, want)
			}
		})
	}
}
