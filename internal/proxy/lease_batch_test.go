package proxy_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l2"
	"github.com/sidecache/sidecache/internal/redistest"
)

// idCounts counts, per id, how often the origin's bulk endpoint was asked
// for it.
type idCounts struct {
	mu sync.Mutex
	n  map[string]*atomic.Int64
}

func (c *idCounts) add(ids []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if c.n[id] == nil {
			c.n[id] = new(atomic.Int64)
		}
		c.n[id].Add(1)
	}
}

func (c *idCounts) of(id string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[id] == nil {
		return 0
	}
	return c.n[id].Load()
}

// A batch route's cold ids cost one upstream fetch each for the cluster,
// as a plain key does: two replicas on one Redis, each asked for the same
// ten cold ids at once, take each id's lease before it joins a batch; an
// id whose lease the other replica holds waits for that replica's fill.
// Before batched misses took the lease, each replica fetched every id in
// its own bulk calls: 20 fetches.
func TestLeaseBatchedOncePerCluster(t *testing.T) {
	srv := redistest.Start(t)
	counts := &idCounts{n: map[string]*atomic.Int64{}}
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		counts.add(ids)
		time.Sleep(50 * time.Millisecond) // both replicas' reads land before either fill
		usersAnswer(func(string) bool { return true })(w, r, ids)
	})
	opts := l2.Options{Addrs: []string{srv.Addr()}, Timeout: 2 * time.Second}
	replicas := []*leaseReplica{
		newLeaseReplicaOf(t, opts, o.upstream, userRoute(100, 20*time.Millisecond)),
		newLeaseReplicaOf(t, opts, o.upstream, userRoute(100, 20*time.Millisecond)),
	}
	const ids = 10
	type answer struct{ id, got string }
	answers := make(chan answer, ids*len(replicas))
	for id := 1; id <= ids; id++ {
		for _, r := range replicas {
			go func() { answers <- answer{strconv.Itoa(id), r.fetch("/users/" + strconv.Itoa(id))} }()
		}
	}
	for range cap(answers) {
		a := <-answers
		if want := fmt.Sprintf(`200 {"id":%s`, a.id); !strings.HasPrefix(a.got, want) {
			t.Errorf("/users/%s answered %q, want %s…", a.id, a.got, want)
		}
	}
	total := int64(0)
	for id := 1; id <= ids; id++ {
		n := counts.of(strconv.Itoa(id))
		total += n
		if n != 1 {
			t.Errorf("id %d fetched %d times, want once for the cluster", id, n)
		}
	}
	if total != ids {
		t.Errorf("ids fetched %d times over %d bulk calls, want %d", total, len(o.snapshot()), ids)
	}
	if n := o.perID.Load(); n != 0 {
		t.Errorf("%d per-id calls, want every id batched", n)
	}
	for i, r := range replicas {
		if r.leases.Load() == 0 {
			t.Errorf("replica %d took no lease", i)
		}
	}
}

// A request whose L2 read just failed does not ask Redis for the lease
// too: with Redis stalled (SIGSTOP), its cold misses would otherwise wait
// out redis.timeout twice (the read, then the lease) until the breaker
// opened. Counted, not timed: the replica's Lease calls. The breaker is
// held closed (a high threshold), as it is for a replica's first misses.
// "stale in L1": the keys were fetched while Redis answered and their L1
// copies went stale (kept for stale_if_error): the read that failed is
// L2's after L1's stale copy, which Lookup used to return as if L2 had
// been read.
func TestLeaseSkippedAfterFailedRead(t *testing.T) {
	staleRoute := clientRoute
	staleRoute.TTL, staleRoute.StaleIfError = 100*time.Millisecond, time.Hour
	for _, c := range []struct {
		name  string
		route testRoute
		path  string
		warm  bool // fetched once before Redis stalls, and stale by then
	}{
		{name: "plain", route: clientRoute, path: "/clients/"},
		{name: "batched", route: userRoute(100, 5*time.Millisecond), path: "/users/"},
		{name: "stale in L1", route: staleRoute, path: "/clients/", warm: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := redistest.Start(t)
			o := newBulkOrigin(t, nil, func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "item %s", r.URL.Path)
			})
			r := newLeaseReplicaOf(t, l2.Options{
				Addrs:            []string{srv.Addr()},
				Timeout:          100 * time.Millisecond,
				FailureThreshold: 1000,
			}, o.upstream, c.route)
			const keys = 8
			fetchAll := func() {
				answers := make(chan string, keys)
				for i := range keys {
					go func() { answers <- r.fetch(c.path + strconv.Itoa(100+i)) }()
				}
				for range keys {
					if got := <-answers; !strings.HasPrefix(got, "200 ") {
						t.Errorf("answered %q, want a 200 from the upstream", got)
					}
				}
			}
			if c.warm {
				fetchAll()
				time.Sleep(2 * c.route.TTL) // every copy past its ttl
			}
			leased := r.leases.Load()
			calls := o.upstream.calls.Load()
			srv.Pause()
			t.Cleanup(srv.Resume) // before the store's Close
			fetchAll()
			if n := o.upstream.calls.Load() - calls; n == 0 {
				t.Errorf("no upstream calls with Redis stalled, want the misses fetched")
			}
			if n := r.leases.Load() - leased; n != 0 {
				t.Errorf("%d lease calls after L2 reads that failed, want none (the read's timeout is the only one a request waits)", n)
			}
		})
	}
}

// A replica waiting on another's lease for a batched id waits as long as
// that holder may take, not upstream.timeout: the holder's id may queue
// behind its group's call in flight (max_in_flight) up to the queue's
// deadline, max_wait + upstream.timeout, then take a call of its own.
// Probe of the queue bounds (D2): a waiter gave up at upstream.timeout and
// fetched the id too, while the holder's fetch was on its way. Here A's
// group is busy with id 1 (2 s, max_in_flight 1) when A takes id 2's
// lease; id 2's call then takes 2.5 s, answered about 4.5 s in, past B's
// upstream.timeout (3 s) and within max_wait + 2 × upstream.timeout.
func TestLeaseBatchedWaiterOutwaitsBusyHolder(t *testing.T) {
	srv := redistest.Start(t)
	counts := &idCounts{n: map[string]*atomic.Int64{}}
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		counts.add(ids)
		switch ids[0] {
		case "1":
			time.Sleep(2 * time.Second)
		case "2":
			time.Sleep(2500 * time.Millisecond)
		}
		usersAnswer(func(string) bool { return true })(w, r, ids)
	})
	rt := userRoute(1, 5*time.Millisecond)
	rt.Batch.MaxInFlight = 1
	opts := l2.Options{Addrs: []string{srv.Addr()}, Timeout: 2 * time.Second}
	a := newLeaseReplicaTimeout(t, opts, o.upstream, 3*time.Second, rt)
	b := newLeaseReplicaTimeout(t, opts, o.upstream, 3*time.Second, rt)
	got := make(chan string, 3)
	go func() { got <- a.fetch("/users/1") }()
	waitUntil(t, "A's call for id 1 sent", func() bool { return counts.of("1") == 1 })
	go func() { got <- a.fetch("/users/2") }()
	waitUntil(t, "A took id 2's lease", func() bool { return a.leases.Load() == 2 })
	go func() { got <- b.fetch("/users/2") }()
	for range cap(got) {
		if g := <-got; !strings.HasPrefix(g, "200 ") {
			t.Errorf("answer %q, want 200", g)
		}
	}
	if n := counts.of("2"); n != 1 {
		t.Errorf("id 2 fetched %d times, want once for the cluster (B waited for A's fill)", n)
	}
	if b.waits.Load() == 0 {
		t.Error("B never waited on A's lease")
	}
}
