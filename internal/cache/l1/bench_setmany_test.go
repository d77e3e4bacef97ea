package l1

import (
	"context"
	"strings"
	"testing"
	"time"
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
	b.Run("set", func(b *testing.B) { benchFillBulk(b, false) })
	b.Run("setmany", func(b *testing.B) { benchFillBulk(b, true) })
}

func benchFillBulk(b *testing.B, many bool) {
	const n = 1 << 17
	ctx := context.Background()
	keys, entries := batchedMissEntries(n, func(id string) string { return `{"id":` + id + `,"name":"` + strings.Repeat("x", 10) + `"}` })
	for _, e := range entries {
		e.Header["Content-Length"] = []string{"30"}
	}
	var s *Store
	defer func() {
		if s != nil {
			s.Close()
		}
	}()
	errs := make([]error, bulkIDs)
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
		if i%bulkIDs != 0 && i%n != 0 {
			continue
		}
		// The bulk answer for the bulkIDs keys looked up last (fewer at
		// the end of a round).
		lo := max(i-bulkIDs, (i-1)/n*n)
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
}
