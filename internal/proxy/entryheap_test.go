package proxy_test

import (
	"net/http"
	"runtime"
	"testing"
	"time"
)

// TestBatchedEntryCostCoversHeap: what the L1 charges a batched miss's
// entry against l1.max_bytes covers the heap it holds, for the layout the
// proxy builds (an element's entry, its tags and its header's values in
// one block, its body, its key). internal/cache/l1's own heap test builds
// its entries itself and cannot see that layout; if the charge fell short
// of it, a flood of distinct ids would hold more than max_bytes. What the
// store holds is measured as the heap it frees when cleared, every request
// done, so the sidecar's other state (connections, flights, metrics) is
// left out.
func TestBatchedEntryCostCoversHeap(t *testing.T) {
	const n = 6000
	o := newBulkOrigin(t, nil)
	e := newEnv(t, o.upstream, []testRoute{userRoute(100, 2*time.Millisecond)})
	for from := 1; from <= n; from += 100 {
		for _, a := range fetchAll(e, userPaths(from, from+99), nil) {
			if a.err != nil || a.code != http.StatusOK {
				t.Fatalf("miss: %d %v", a.code, a.err)
			}
		}
	}
	e.l1.Wait()
	if got := e.l1.Items(); got != n {
		t.Fatalf("L1 holds %d entries, want %d (nothing may be evicted here)", got, n)
	}
	o.reset() // the origin's record of its calls is the test's, not the store's
	charged := e.l1.Bytes()
	full := heapInUse()
	e.l1.Clear()
	held := full - heapInUse()
	t.Logf("per entry: charged %d B, holds about %d B", charged/n, held/n)
	if held > charged {
		t.Fatalf("%d batched entries hold %d B of heap but are charged %d B", n, held, charged)
	}
}

func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
