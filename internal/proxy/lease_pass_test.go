package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/cache/l2"
	"github.com/sidecache/sidecache/internal/redistest"
)

// An answer that may not be stored is not serialized through the cluster
// lease (cluster-wide hit-for-pass). Two replicas share one Redis; the
// origin answers private, each call its own body. Once replica A's lease
// fill learned that the key's answer is private, the next misses skip
// the lease: with A's next fetch held open at the origin, B's miss
// reaches the origin too (its own fetch), rather than wait on A's lease
// for a fill that will never be stored and fetch after it. Counted, not
// timed: origin calls while A's is held, and B's waits on a lease. Every
// client gets its own call's answer (no body twice), one origin call per
// client request. Once the origin answers storably, the first such
// answer clears the mark and is stored: the next request on the other
// replica is a hit.
// Before the mark, B's flight waited on A's lease (B's WaitFill) for
// every request, on both routes: the lease of a private key was taken
// afresh over its last holder's release mark each time.
func TestLeasePrivateNotSerialized(t *testing.T) {
	for _, c := range []struct {
		name  string
		route testRoute
		path  string
	}{
		{name: "plain", route: clientRoute, path: "/clients/7"},
		{name: "batched", route: userRoute(100, time.Millisecond), path: "/users/7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := redistest.Start(t)
			var private, hold atomic.Bool
			private.Store(true)
			gate := make(chan struct{})
			var opened atomic.Bool
			open := func() {
				if opened.CompareAndSwap(false, true) {
					close(gate)
				}
			}
			t.Cleanup(open) // before the origin's Close, which waits for its handlers
			var calls atomic.Int64
			answer := func(w http.ResponseWriter, r *http.Request, ids []string) {
				n := calls.Add(1)
				if hold.Load() {
					held(t, gate)
				}
				if private.Load() {
					w.Header().Set("Cache-Control", "private")
				}
				if ids == nil {
					fmt.Fprintf(w, "call %d", n)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `[{"id":%s,"call":%d}]`, ids[0], n)
			}
			o := newBulkOrigin(t, answer, func(w http.ResponseWriter, r *http.Request) { answer(w, r, nil) })
			opts := l2.Options{Addrs: []string{srv.Addr()}, Timeout: 2 * time.Second}
			a := newLeaseReplicaOf(t, opts, o.upstream, c.route)
			b := newLeaseReplicaOf(t, opts, o.upstream, c.route)

			seen := map[string]bool{}
			own := func(who, got string) {
				t.Helper()
				if !strings.HasPrefix(got, "200 ") || !strings.Contains(got, "call") {
					t.Errorf("%s answered %q, want a 200 from a call", who, got)
				}
				if seen[got] {
					t.Errorf("%s answered %q, another client's private answer", who, got)
				}
				seen[got] = true
			}
			// A's lease fill learns that the key's answer is private.
			own("A's first request", a.fetch(c.path))
			if a.leases.Load() != 1 {
				t.Fatalf("A asked for the lease %d times, want once", a.leases.Load())
			}
			flush(t, a) // its release is in Redis

			hold.Store(true)
			aDone := make(chan string, 1)
			go func() { aDone <- a.fetch(c.path) }()
			waitUntil(t, "A's second fetch held at the origin", func() bool { return calls.Load() == 2 })
			bDone := make(chan string, 1)
			go func() { bDone <- b.fetch(c.path) }()
			waitUntil(t, "B's miss at the origin or waiting on a lease", func() bool {
				return calls.Load() == 3 || b.waits.Load() > 0
			})
			if n := b.waits.Load(); n != 0 {
				t.Errorf("B waited on A's lease %d times while A's fetch of a private answer was held, want its own fetch at once", n)
			}
			open()
			own("A's second request", <-aDone)
			own("B", <-bDone)
			if n := calls.Load(); n != 3 {
				t.Errorf("origin calls = %d, want 3 (one per client request)", n)
			}

			// A storable answer clears the mark, and is stored.
			private.Store(false)
			if got := a.fetch(c.path); !strings.HasPrefix(got, "200 ") {
				t.Fatalf("A answered %q after the origin turned public, want 200", got)
			}
			flush(t, a) // its entry and its release are in Redis
			if v := leaseValue(t, srv.Addr(), "lease:"); v == "pass" {
				t.Errorf("the lease key still holds the hit-for-pass mark after a stored answer")
			}
			before := calls.Load()
			if got := b.fetch(c.path); !strings.HasPrefix(got, "200 ") {
				t.Errorf("B answered %q, want 200", got)
			}
			if n := calls.Load() - before; n != 0 {
				t.Errorf("B's request after A stored the public answer made %d origin calls, want 0 (an L2 hit)", n)
			}
		})
	}
}

// flush returns once r's queued L2 writes (entries, lease releases) are
// in Redis.
func flush(t *testing.T, r *leaseReplica) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.l2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// leaseValue is the value of the one lease key under prefix ("" when
// there is none).
func leaseValue(t *testing.T, addr, prefix string) string {
	t.Helper()
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	keys, err := rc.Keys(ctx, prefix+"l:*").Result()
	if err != nil || len(keys) > 1 {
		t.Fatalf("lease keys = %q, %v, want at most one", keys, err)
	}
	if len(keys) == 0 {
		return ""
	}
	v, _ := rc.Get(ctx, keys[0]).Result()
	return v
}
