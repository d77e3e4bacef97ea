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

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/cache/l2"
	"github.com/sidecache/sidecache/internal/redistest"
)

// leaseHold is the replicas' l2 LeaseHold: how long a lease outlives its
// holder's last renewal. Renewals come every third of it, so a live
// holder's lease lapses, by design, when its process is stalled for two
// thirds of it: a one-second hold lapsed under -race on two busy cores
// (the l2 test TestLeaseRenewedWhileHolderWorks met the same stall).
// Three seconds leave a two-second stall; the test waits for renewals and
// takeovers (states), so the hold sets no duration of its own beyond them.
const leaseHold = 3 * time.Second

// leaseReplica is one sidecar with a real L1 and a real L2 on a shared
// redis-server, its L2 store doubling as the cluster lease.
type leaseReplica struct {
	*env
	l2     *l2.Store
	waits  atomic.Int64 // WaitFill calls: a flight waits on another's lease
	leases atomic.Int64 // Lease calls: a flight asks for the lease
}

// countingLeaser is the replica's real lease, counting the calls on it.
type countingLeaser struct {
	*l2.Store
	waits, leases *atomic.Int64
}

func (l countingLeaser) Lease(ctx context.Context, key string, ttl time.Duration) (func(time.Duration), bool, bool, error) {
	l.leases.Add(1)
	return l.Store.Lease(ctx, key, ttl)
}

func (l countingLeaser) WaitFill(ctx context.Context, key string, max time.Duration, newer time.Time) (*cache.Entry, bool, bool, error) {
	l.waits.Add(1)
	return l.Store.WaitFill(ctx, key, max, newer)
}

func newLeaseReplica(t *testing.T, addr string, up *upstream) *leaseReplica {
	t.Helper()
	return newLeaseReplicaOf(t, l2.Options{
		Addrs:   []string{addr},
		Timeout: 2 * time.Second, // a loaded machine must not open the breaker
	}, up, clientRoute)
}

// newLeaseReplicaOf is newLeaseReplica with its own L2 options (the
// prefix and lease hold are the other replicas') and routes.
func newLeaseReplicaOf(t *testing.T, o l2.Options, up *upstream, routes ...testRoute) *leaseReplica {
	t.Helper()
	return newLeaseReplicaTimeout(t, o, up, 10*time.Second, routes...)
}

// newLeaseReplicaTimeout is newLeaseReplicaOf with upstream.timeout
// timeout, and lease_ttl that too, as the config's default makes it.
func newLeaseReplicaTimeout(t *testing.T, o l2.Options, up *upstream, timeout time.Duration, routes ...testRoute) *leaseReplica {
	t.Helper()
	o.Prefix, o.LeaseHold = "lease:", leaseHold
	st, err := l2.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r := &leaseReplica{l2: st}
	r.env = newEnv(t, up, routes, func(o *proxyOptions, l1s *l1.Store) {
		o.Timeout, o.LeaseTTL = timeout, timeout
		o.Cache = cache.NewTiered(l1s, st, cache.TieredOptions{})
		o.Leaser = countingLeaser{Store: st, waits: &r.waits, leases: &r.leases}
	})
	return r
}

// waitRenewals polls the one lease in Redis (under prefix) until it has
// seen it renewed n times (its PTTL going up), holding the token it held
// at first throughout: a lease that lapsed or changed hands fails the
// test at once, naming that, rather than as an upstream count later.
func waitRenewals(t *testing.T, addr, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	keys, err := rc.Keys(ctx, prefix+"l:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("lease keys = %q, %v, want one", keys, err)
	}
	token, err := rc.Get(ctx, keys[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	prev, renewals := time.Duration(1<<62), 0
	for renewals < n {
		var get *redis.StringCmd
		var pttl *redis.DurationCmd
		_, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
			get, pttl = p.Get(ctx, keys[0]), p.PTTL(ctx, keys[0])
			return nil
		})
		if v := get.Val(); err != nil || v != token {
			t.Fatalf("after %d renewals the lease holds %q (%v), want the holder's %q", renewals, v, err, token)
		}
		if d := pttl.Val(); d > prev {
			renewals++
		}
		prev = pttl.Val()
		time.Sleep(5 * time.Millisecond)
	}
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
// wait on the lease. While A lives, its renewals keep the lease past the
// hold it was taken for (four seen in Redis, A's token throughout) and the
// waiters get A's fill: one upstream call.
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
					held(t, gate)
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
			await(t, holding) // A holds the lease; its upstream request is blocked

			const perReplica = 3
			answers := make(chan string, perReplica*len(waiters))
			for _, w := range waiters {
				for range perReplica {
					go func() { answers <- w.fetch(path) }()
				}
			}
			for _, w := range waiters {
				waitFor(t, func() bool { return w.waits.Load() >= 1 }) // its flight waits on A's lease
			}
			if c.kill {
				_ = a.l2.Close()
			} else {
				// Renewed four times, each no sooner than LeaseHold/3
				// after the last: the lease has outlived the hold it was
				// taken for, and only renewals kept it.
				waitRenewals(t, srv.Addr(), "lease:", 4)
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
