//go:build !race

package coalesce

import (
	"context"
	"testing"
)

// A flight costs the Flight and its channel, and nothing for the context
// its steps run with (issue 23: context.WithoutCancel's was one
// allocation more per batched miss).
func TestDoThenAllocs(t *testing.T) {
	var g Group[int]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := func(context.Context, *Flight[int]) (int, Next[int], error) { return 1, Next[int]{}, nil }
	if n := testing.AllocsPerRun(100, func() { _, _, _ = g.DoThen(ctx, "k", first) }); n > 2 {
		t.Errorf("DoThen: %v allocations per flight, want 2 (the Flight and its channel)", n)
	}
}
