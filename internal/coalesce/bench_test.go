package coalesce

import (
	"context"
	"strconv"
	"testing"
)

// BenchmarkDoThenHandoff is the flight of a batched miss: a leader with a
// cancellable ctx (a server request's), a first step that misses and
// hands the flight to another goroutine, which finishes it, as the
// proxy's batch does: the leader parks in DoThen's wait and is woken by
// Finish.
// Run: go test -run - -bench DoThenHandoff -benchmem ./internal/coalesce
func BenchmarkDoThenHandoff(b *testing.B) {
	var g Group[int]
	q := make(chan *Flight[int], 64)
	go func() {
		for f := range q {
			f.Finish(1, nil)
		}
	}()
	defer close(q)
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	first := func(_ context.Context, f *Flight[int]) (int, Next[int], error) {
		q <- f
		return 0, Next[int]{Handed: true}, nil
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ctx, cancel := context.WithCancel(context.Background())
		if v, _, err := g.DoThen(ctx, keys[i%len(keys)], first); v != 1 || err != nil {
			b.Fatal(v, err)
		}
		cancel()
	}
}
