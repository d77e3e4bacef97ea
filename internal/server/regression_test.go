package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/redistest"
)

// With L1 disabled (`l1.max_bytes: 0`, documented), peerInvalidation
// returns before recording the tombstone (`if s.l1 == nil ... return`). A
// read on replica B that began before a write through replica A finishes
// after A invalidated L2, and B stores the pre-write body in L2, where every
// replica then serves it for the rest of the TTL. With L1 on, the same race
// is closed by the tombstone; here it is not.
func TestL1DisabledPeerKeepsTombstone(t *testing.T) {
	rs := redistest.Start(t)
	var mu sync.Mutex
	ver := 0
	// A GET of /clients/3 reads the value, reports on read, and answers
	// once released: the slow answer, in order rather than by a sleep.
	read, release := make(chan struct{}, 1), make(chan struct{})
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if r.Method == http.MethodPatch {
			ver++
		}
		v := ver
		mu.Unlock()
		if r.Method == http.MethodGet && r.URL.Path == "/clients/3" && v == 0 {
			read <- struct{}{}
			<-release
		}
		fmt.Fprintf(w, "v%d", v)
	}))
	t.Cleanup(origin.Close)
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
  token: secret
upstream:
  url: %s
  timeout: 2s
cache:
  l1:
    max_bytes: 0
%s
routes:
  - name: client
    path: /clients/{id}
    ttl: 5m
    tags: ["client:{id}"]
  - name: client-write
    methods: [PATCH]
    path: /clients/{id}
    invalidate: ["client:{id}"]
`, origin.URL, l2Block(false, rs.Addr()))
	a := startReplicaYAML(t, yaml)
	b := startReplicaYAML(t, yaml)

	first := make(chan string, 1)
	go func() {
		_, _, got, err := b.try(http.MethodGet, "/clients/3")
		if err != nil {
			got = err.Error()
		}
		first <- got
	}()
	<-read // B's read is at the origin and has the pre-write value
	if code, _, _ := a.do(t, http.MethodPatch, "/clients/3"); code != 200 {
		t.Fatalf("PATCH: %d", code)
	}
	eventually(t, 5*time.Second, "B applied A's invalidation", func() bool {
		return metric(t, b, "sidecache_invalidations_total", `source="peer"`) >= 1
	})
	close(release)
	if got := <-first; got != "v0" {
		t.Fatalf("B's pre-write read = %q", got)
	}
	// B's L2 writes are queued and sent in order: once one B queues after
	// the pre-write read is in Redis, that read's write (if any) landed.
	rc := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	defer rc.Close()
	b.get(t, "/clients/4")
	eventually(t, 5*time.Second, "B's later L2 write landed", func() bool {
		n, err := rc.Exists(context.Background(), "sidecache:e:GET clients.svc/clients/4").Result()
		return err == nil && n == 1
	})
	code, h, got := b.do(t, http.MethodGet, "/clients/3")
	if code != 200 || got != "v1" {
		t.Fatalf("read after the write was answered = %d %q (Cache-Status %q), want v1", code, got, h.Get("Cache-Status"))
	}
}

// docs/configuration.md: "a call that runs out [of upstream.timeout]
// answers 504". With the Redis lease on (the default), a replica that did
// not get the lease waits in WaitFill up to lease_ttl for the holder; the
// defect was that its own fetch then got a fresh upstream.timeout, so its
// client waited lease_ttl plus the timeout.
//
// What it proves now: B's waiting for another replica's lease comes out of
// B's upstream.timeout, and B answers 504 while the holder still holds the
// lease. The holder A has a minute (its upstream.timeout, and so its
// lease_ttl) and its fetch is held at the origin until B has answered; B
// has upstream.timeout 1s and lease_ttl 60s. Order, not sleeps: B asks
// once the origin has A's request and A's token is under the lease key in
// Redis, and the key still holds that token after B's answer (B gave up on
// its own deadline, not because the lease ended). The one bound is
// askWithin's 8 s: the fix answers after B's 1 s, the defect after
// lease_ttl (60 s), and no scheduling delay bridges either gap.
func TestLeaseWaitWithinUpstreamTimeout(t *testing.T) {
	rs := redistest.Start(t)
	var gets atomic.Int64
	gate := make(chan struct{})
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "v0")
	}))
	t.Cleanup(o.Close)
	// A's lease is taken for 4 × its redis.timeout and renewed every third
	// of that: 40 s, so that no scheduling delay lets it lapse mid-test.
	slowHold := strings.Replace(l2Block(false, rs.Addr()), "timeout: 200ms", "timeout: 10s", 1)
	longLease := l2Block(false, rs.Addr()) + "    lease_ttl: 60s\n"
	a := startReplicaYAML(t, withUpstreamTimeout(t, fmt.Sprintf(baseConfig, o.URL, slowHold), "60s"))
	b := startReplicaYAML(t, withUpstreamTimeout(t, fmt.Sprintf(baseConfig, o.URL, longLease), "1s"))
	var open sync.Once
	release := func() { open.Do(func() { close(gate) }) }
	t.Cleanup(release) // before the replicas stop: A's fetch is held

	type answer struct {
		code int
		body string
		err  error
	}
	aDone := make(chan answer, 1)
	go func() {
		code, _, got, err := a.try(http.MethodGet, "/clients/1")
		aDone <- answer{code, got, err}
	}()
	eventually(t, 10*time.Second, "A's fetch at the origin", func() bool { return gets.Load() == 1 })
	raw := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	defer raw.Close()
	const leaseKey = "sidecache:l:GET clients.svc/clients/1"
	token, err := raw.Get(context.Background(), leaseKey).Result()
	if err != nil || token == "released" {
		t.Fatalf("lease key %q = %q, %v: A does not hold the lease (key layout changed?)", leaseKey, token, err)
	}

	code, _, got := askWithin(t, b, 8*time.Second, "/clients/1")
	if code != http.StatusGatewayTimeout {
		t.Fatalf("B: %d %q, want 504", code, got)
	}
	if now, err := raw.Get(context.Background(), leaseKey).Result(); err != nil || now != token {
		t.Fatalf("lease key after B's answer = %q, %v; want A's token still: B answered only once the lease ended", now, err)
	}
	release()
	if a := <-aDone; a.err != nil || a.code != 200 || a.body != "v0" {
		t.Fatalf("A: %d %q %v, want 200 v0", a.code, a.body, a.err)
	}
}
