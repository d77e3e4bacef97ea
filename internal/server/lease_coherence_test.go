package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// TestLeaseWaiterRefusesFillOlderThanMaxLag: the cluster lease does not
// get round the coherence bound (README, "The promise"). A replica that
// waits on another's lease reads the holder's fill through its tiers,
// which refuse an entry older than coherence.max_lag while this replica
// cannot prove it hears its peers' invalidations: the fill's request may
// have left before a write that was acknowledged more than max_lag before
// the waiter reads. The waiter then fetches on its own, once, and counts
// the refusal (sidecache_coherence_refused_total).
//
// This is how TestClusterWideCoalescing saw 2 and 3 upstream GETs on a
// loaded machine: its upstream held the holder's answer for longer than
// max_lag (the fill is as old as its request), and a waiter whose
// heartbeats were late, or not yet proven since its start, refused it.
//
// Deterministic: the waiter's proof is made to not cover the fill by a
// gap (its subscription killed and rebuilt after the holder's request
// reached the upstream: the floor is after the fill's request left), and
// the upstream answers only once the fill is older than max_lag.
func TestLeaseWaiterRefusesFillOlderThanMaxLag(t *testing.T) {
	const maxLag = 300 * time.Millisecond
	rs := redistest.Start(t)
	o := newOrigin(t)
	gate := make(chan struct{})
	var opened sync.Once
	open := func() { opened.Do(func() { close(gate) }) }
	t.Cleanup(open) // before the origin's Close, which waits for its handlers
	arrived := make(chan time.Time, 8)
	held := o.Config.Handler
	o.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			arrived <- time.Now()
			<-gate
		}
		held.ServeHTTP(w, r)
	})
	// No Redis call times out, however loaded the machine: a lease or a
	// read that failed would be a lone fetch for another reason.
	block := strings.Replace(l2Block(false, rs.Addr()), "timeout: 200ms", "timeout: 10s", 1)
	yaml := withUpstreamTimeout(t, fmt.Sprintf(baseConfig, o.URL, block), "30s") +
		fmt.Sprintf("coherence: {max_lag: %v}\n", maxLag)
	a := startReplicaYAML(t, yaml)
	b := startReplicaYAML(t, yaml)

	type answer struct {
		code int
		body string
		cs   string
		err  error
	}
	ask := func(r *replica) <-chan answer {
		done := make(chan answer, 1)
		go func() {
			code, h, body, err := r.try(http.MethodGet, "/clients/9")
			done <- answer{code, body, h.Get("Cache-Status"), err}
		}()
		return done
	}
	// A takes the lease and fetches: its request is at the upstream.
	fromA := ask(a)
	left := <-arrived
	// B misses L2 and waits on A's lease (or, when late, asks for it
	// after A's release: the same read of A's fill decides).
	fromB := ask(b)
	eventually(t, 30*time.Second, "B read L2", func() bool { return tierLookups(t, b, "l2") >= 1 })
	// A gap on B's subscription: its floor comes after A's request left,
	// so B's proof does not cover A's fill once the fill is older than
	// max_lag.
	if err := rawClient(t, rs.Addr()).Do(context.Background(), "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "B's floor after A's request left", func() bool {
		floor, err := time.Parse(time.RFC3339Nano, fmt.Sprint(readyzBody(t, b)["coherence_floor"]))
		return err == nil && floor.After(left)
	})
	eventually(t, 30*time.Second, "A's fill older than max_lag", func() bool { return time.Since(left) > maxLag })
	refused := metric(t, b, "sidecache_coherence_refused_total", `tier="l2"`)
	open()
	for name, c := range map[string]<-chan answer{"A": fromA, "B": fromB} {
		if v := <-c; v.err != nil || v.code != 200 || v.body != body("9", 0) {
			t.Fatalf("%s: %d %q %v", name, v.code, v.body, v.err)
		} else if name == "B" && strings.Contains(v.cs, "hit") {
			t.Fatalf("B served A's fill, older than max_lag and not covered by its proof: %q", v.cs)
		}
	}
	if got := metric(t, b, "sidecache_coherence_refused_total", `tier="l2"`); got <= refused {
		t.Fatalf("B's sidecache_coherence_refused_total{tier=\"l2\"} %v, want more than %v", got, refused)
	}
	if n := o.gets.Load(); n != 2 {
		t.Fatalf("upstream GETs = %d, want 2 (A's, and B's own after it refused A's fill)", n)
	}
}
