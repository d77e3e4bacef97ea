package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

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
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if r.Method == http.MethodPatch {
			ver++
		}
		v := ver
		mu.Unlock()
		if r.Method == http.MethodGet {
			time.Sleep(500 * time.Millisecond) // the value is read, then the answer is slow
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
	time.Sleep(150 * time.Millisecond) // B's read is at the origin
	if code, _, _ := a.do(t, http.MethodPatch, "/clients/3"); code != 200 {
		t.Fatalf("PATCH: %d", code)
	}
	if got := <-first; got != "v0" {
		t.Fatalf("B's pre-write read = %q", got)
	}
	time.Sleep(500 * time.Millisecond) // B's asynchronous L2 write lands
	code, h, got := b.do(t, http.MethodGet, "/clients/3")
	if code != 200 || got != "v1" {
		t.Fatalf("read after the write was answered = %d %q (Cache-Status %q), want v1", code, got, h.Get("Cache-Status"))
	}
}

// docs/configuration.md: "a call that runs out [of upstream.timeout]
// answers 504". With the Redis lease
// on (the default), a replica that did not get the lease waits in WaitFill
// up to lease_ttl (default: upstream.timeout) for the holder, and when the
// holder's fetch times out it starts its own fetch with a fresh
// upstream.timeout: its client waits about twice the timeout.
func TestLeaseWaitWithinUpstreamTimeout(t *testing.T) {
	rs := redistest.Start(t)
	o := newOrigin(t)
	o.delay.Store(int64(3 * time.Second)) // upstream.timeout is 2s
	a := startReplica(t, o.URL, l2Block(false, rs.Addr()))
	b := startReplica(t, o.URL, l2Block(false, rs.Addr()))

	aDone := make(chan int, 1)
	go func() {
		code, _, _, _ := a.try(http.MethodGet, "/clients/1")
		aDone <- code
	}()
	time.Sleep(200 * time.Millisecond) // A holds the lease
	start := time.Now()
	code, _, _ := b.do(t, http.MethodGet, "/clients/1")
	took := time.Since(start)
	if c := <-aDone; c != http.StatusGatewayTimeout {
		t.Fatalf("A: %d, want 504", c)
	}
	if code != http.StatusGatewayTimeout {
		t.Fatalf("B: %d, want 504", code)
	}
	if took > 3*time.Second {
		t.Fatalf("B answered 504 after %v; upstream.timeout is 2s", took)
	}
}
