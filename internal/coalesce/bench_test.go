package coalesce

import (
	"context"
	"strconv"
	"testing"
)

// queueHandoff is a Handoff whose flights a goroutine of its own finishes, as
// the proxy's batch does: the leader parks in DoThen's wait and is woken
// by Finish.
type queueHandoff struct{ q chan *Flight[int] }

func (h queueHandoff) Later(_ context.Context, f *Flight[int]) { h.q <- f }

// BenchmarkDoThenHandoff is the flight of a batched miss: a leader with a
// cancellable ctx (a server request's), a first step that misses, a
// Handoff that another goroutine finishes.
// Run: go test -run - -bench DoThenHandoff -benchmem ./internal/coalesce
func BenchmarkDoThenHandoff(b *testing.B) {
	var g Group[int]
	h := queueHandoff{q: make(chan *Flight[int], 64)}
	go func() {
		for f := range h.q {
			f.Finish(1, nil)
		}
	}()
	defer close(h.q)
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	first := func(context.Context) (int, Next[int], error) { return 0, Next[int]{Handoff: h}, nil }
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ctx, cancel := context.WithCancel(context.Background())
		if v, _, err := g.DoThen(ctx, keys[i%len(keys)], first); v != 1 || err != nil {
			b.Fatal(v, err)
		}
		cancel()
	}
}
