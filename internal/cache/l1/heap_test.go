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
// keys, must each hold no more heap than they are charged; so must those
// a batched miss keeps, whose id and URI tags each name one entry (their
// slots in the tag index were once charged less than they held).
func TestCostCoversHeapPerItem(t *testing.T) {
	shapes := []struct {
		name string
		tags func(i int) []string
	}{
		{"route tag", func(int) []string { return []string{"_route:search"} }},
		{"route, id and URI tags", func(i int) []string {
			return []string{"_route:users", fmt.Sprintf("user:%d", i), fmt.Sprintf("uri:/users/%d", i)}
		}},
	}
	for _, shape := range shapes {
		for _, keyLen := range []int{40, 3 << 10} {
			t.Run(fmt.Sprintf("%s, key %d B", shape.name, keyLen), func(t *testing.T) {
				testCostCoversHeap(t, keyLen, shape.tags)
			})
		}
	}
}

func testCostCoversHeap(t *testing.T, keyLen int, tags func(i int) []string) {
	const n = 4000
	s := newStore(t, Options{MaxBytes: 1 << 30, ExpectedItems: n})
	pad := strings.Repeat("k", keyLen-8)
	// Everything the store keeps is built after the first reading, and the
	// test keeps none of it: the difference is what the store holds.
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
			Tags:     tags(i),
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
}

func heapAlloc() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
