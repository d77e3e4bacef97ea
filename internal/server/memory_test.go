package server_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// A hostile client that never repeats a key must not grow the heap beyond
// what the configuration allows: the L1 charges each entry for its key, and
// nothing else kept per distinct key (tag index, tombstones, hit-for-pass)
// grows without a bound. 42 MB of distinct 3 KiB keys (kept under the 4 KiB
// default of cache.max_key_bytes, so they are cached, not passed through) at
// a 4 MiB L1 must leave the heap in use, after a collection, under
// 4 × max_bytes + 16 MiB.
func TestDistinctKeysFloodKeepsHeapBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 42 MB of requests")
	}
	const (
		maxBytes  = 4 << 20
		keyBytes  = 3 << 10
		requests  = 14000 // × 3 KiB = 42 MB of distinct keys
		workers   = 8
		heapBound = 4*maxBytes + 16<<20
	)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":1,"name":"client"}`)
	}))
	t.Cleanup(origin.Close)
	r := startReplicaYAML(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
upstream:
  url: %s
  timeout: 5s
cache:
  l1:
    max_bytes: %d
routes:
  - name: search
    path: /search
    ttl: 10m
    tags: ["search"]
`, origin.URL, maxBytes))

	var next, ok atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			q := make([]byte, keyBytes)
			for next.Add(1) <= requests {
				for i := range q {
					q[i] = 'a' + byte(rng.IntN(26))
				}
				code, _, _, err := r.try(http.MethodGet, "/search?q="+string(q))
				if err == nil && code == http.StatusOK {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if ok.Load() != requests {
		t.Fatalf("%d of %d requests answered 200", ok.Load(), requests)
	}
	_, h, _ := r.do(t, http.MethodGet, "/search?q=last")
	if h.Get("Cache-Status") == "" {
		t.Fatal("no Cache-Status: the route is not cached")
	}

	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("heap in use after %d distinct keys of %d B: %.1f MiB (bound %.0f MiB)",
		requests, keyBytes, float64(ms.HeapInuse)/(1<<20), float64(heapBound)/(1<<20))
	if ms.HeapInuse > heapBound {
		t.Fatalf("heap in use %d B, over the bound 4 × l1.max_bytes + 16 MiB = %d B", ms.HeapInuse, heapBound)
	}
}
