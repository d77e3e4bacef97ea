package l1

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
)

// bulkIDs is how many ids a batched miss's bulk call carried in
// bench/miss-vs-hit.sh's profile (21.7 on average).
const bulkIDs = 22

// BenchmarkFillBulk is BenchmarkFillBatchedMiss with the writes of one
// bulk answer's entries together, as the proxy makes them: for each
// bulkIDs keys never stored, their lookups (each a miss, as the requests
// that joined the batch made them), then their writes, one Set each (set)
// or one SetMany (setmany). An op is one key; cpu-ns/op is the process's
// CPU per key, ristretto's goroutines and the GC included.
//
//	go test -run - -bench FillBulk -benchtime 131072x -count 6 -benchmem ./internal/cache/l1
func BenchmarkFillBulk(b *testing.B) {
	b.Run("set", func(b *testing.B) { benchFill(b, bulkIDs, false) })
	b.Run("setmany", func(b *testing.B) { benchFill(b, bulkIDs, true) })
	// The entries of one bulk answer share one header map, their ETags
	// beside it (cache.Entry.SetETag), as the proxy's elements do.
	b.Run("setmany-shared", func(b *testing.B) { benchFill(b, -bulkIDs, true) })
}

// benchFill looks up 2^17 keys never stored, one a op, and writes each
// group of size keys after their lookups (size 1: each right after its
// own), by Set or SetMany, into a store sized like the bench's (made and
// closed outside the CPU it reports); it returns a key and its entry.
// A negative size is -size with the entries' header maps shared, each
// entry's ETag beside it, as a bulk answer's elements are stored.
func benchFill(b *testing.B, size int, many bool) (string, *cache.Entry) {
	const n = 1 << 17
	ctx := context.Background()
	keys, entries := batchedMissEntries(n, func(id string) string { return `{"id":` + id + `,"name":"` + strings.Repeat("x", 10) + `"}` })
	for _, e := range entries {
		e.Header["Content-Length"] = []string{"30"}
	}
	if size < 0 {
		size = -size
		shared := entries[0].Header
		for i, e := range entries {
			e.Header = shared
			e.SetETag([]string{`"` + strconv.Itoa(i) + `"`})
		}
	}
	var s *Store
	defer func() {
		if s != nil {
			s.Close()
		}
	}()
	errs := make([]error, size)
	var cpu time.Duration
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%n == 0 {
			b.StopTimer()
			if s != nil {
				cpu += processCPU(b)
				s.Close()
			}
			var err error
			if s, err = New(Options{MaxBytes: 256 << 20}); err != nil {
				b.Fatal(err)
			}
			cpu -= processCPU(b)
			b.StartTimer()
		}
		if _, ok, _ := s.Get(ctx, keys[i%n]); ok {
			b.Fatal("hit on a key never stored")
		}
		i++
		if i%size != 0 && i%n != 0 {
			continue
		}
		// The bulk answer for the size keys looked up last (fewer at
		// the end of a round).
		lo := max(i-size, (i-1)/n*n)
		if many {
			s.SetMany(ctx, keys[lo%n:(i-1)%n+1], entries[lo%n:(i-1)%n+1], errs, nil)
		} else {
			for j := lo; j < i; j++ {
				errs[j-lo] = s.Set(ctx, keys[j%n], entries[j%n])
			}
		}
	}
	s.Wait()
	cpu += processCPU(b)
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	return keys[0], entries[0]
}
