package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// The cluster lease keeps coalescing once a stale copy exists: replicas
// that hold the stale copy wait for an entry newer than it, so a key past
// its TTL (inside stale_if_error) costs one upstream call cluster-wide, as
// a cold key does.
func TestLeaseCoalescesPastTTL(t *testing.T) {
	rs := redistest.Start(t)
	o := newOrigin(t)
	// A generous Redis timeout: a lease command that times out on a busy
	// machine is (correctly) a lone fetch, which is not what this counts.
	l2 := strings.Replace(l2Block(false, rs.Addr()), "timeout: 200ms", "timeout: 2s", 1)
	// /short with a 1s TTL: long enough that the refreshed entry is still
	// fresh when the waiters read it, on a slow machine too.
	yaml := strings.Replace(fmt.Sprintf(baseConfig, o.URL, l2), "ttl: 300ms", "ttl: 1s", 1)
	var reps []*replica
	for range 3 {
		reps = append(reps, startReplicaYAML(t, yaml))
	}
	if _, cs := reps[0].get(t, "/short/7"); !strings.Contains(cs, "stored") {
		t.Fatalf("priming: %q", cs)
	}
	for _, r := range reps[1:] {
		eventually(t, 3*time.Second, "l2 holds the entry", func() bool {
			_, cs := r.get(t, "/short/7")
			return strings.Contains(cs, "hit")
		})
	}
	// Past the TTL, inside stale_if_error: every replica's L1 and L2 say
	// the entry is no longer fresh (GET /cache), whatever the time it took.
	for _, r := range reps {
		eventually(t, 5*time.Second, "the entry is stale on every tier", func() bool {
			v := inspect(t, r, "/short/7")
			stale := len(v.Entries) == 2
			for _, e := range v.Entries {
				stale = stale && !e.Fresh && e.WithinStaleIfError
			}
			return stale
		})
	}
	o.delay.Store(int64(100 * time.Millisecond))
	before := o.gets.Load()
	var wg sync.WaitGroup
	var bad atomic.Int64
	for _, r := range reps {
		for range 30 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, _, b, err := r.try(http.MethodGet, "/short/7")
				if err != nil || code != 200 || b != fmt.Sprintf("client-%s-v0", "/short/7") {
					bad.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d wrong answers", bad.Load())
	}
	// One fetch is the usual count (logged). A replica whose first lease
	// attempt comes after the holder released, but whose L2 read came
	// before the holder's write landed, fetches on its own; so what is
	// guaranteed is fewer fetches than replicas. Before waiters waited for
	// an entry newer than their stale copy, every replica fetched (3).
	n := o.gets.Load() - before
	t.Logf("upstream GETs for the stale key: %d", n)
	if n >= int64(len(reps)) {
		t.Fatalf("upstream GETs for the stale key = %d, want fewer than one per replica (%d)", n, len(reps))
	}
}
