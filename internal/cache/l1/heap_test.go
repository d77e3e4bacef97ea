package l1

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
)

// The cost an item is charged must cover the heap it really holds, or
// MaxBytes bounds nothing: a flood of distinct long keys with small answers
// once held 40 times MaxBytes. Stored entries of the shape a proxy keeps
// (a small JSON answer, two headers, a route tag), under short and long
// keys, must each hold no more heap than they are charged.
func TestCostCoversHeapPerItem(t *testing.T) {
	for _, keyLen := range []int{40, 3 << 10} {
		t.Run(fmt.Sprintf("key %d B", keyLen), func(t *testing.T) {
			const n = 4000
			s := newStore(t, Options{MaxBytes: 1 << 30, ExpectedItems: n})
			pad := strings.Repeat("k", keyLen-8)
			// Everything the store keeps is built after the first reading,
			// and the test keeps none of it: the difference is what the
			// store holds.
			before := heapAlloc()
			var charged int64
			for i := range n {
				key := fmt.Sprintf("%s%08d", pad, i)
				e := &cache.Entry{
					Status:   http.StatusOK,
					Header:   http.Header{"Content-Type": {"application/json"}, "Content-Length": {"24"}},
					Body:     []byte(`{"id":1,"name":"client"}`),
					StoredAt: time.Now(),
					TTL:      time.Hour,
					Tags:     []string{"_route:search"},
				}
				charged += cost(key, e)
				set(t, s, key, e)
			}
			s.Wait()
			held := heapAlloc() - before
			if s.Items() != n {
				t.Fatalf("Items() = %d, want %d (nothing may be evicted here)", s.Items(), n)
			}
			t.Logf("per item: charged %d B, holds about %d B", charged/n, held/n)
			if held > charged {
				t.Fatalf("%d items hold %d B of heap but are charged %d B", n, held, charged)
			}
		})
	}
}

func heapAlloc() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
