package coalesce

import (
	"context"
	"testing"
)

// A flight whose first step answers it (an L2 hit: DoThen's usual case)
// has no caller waiting for it, so it costs the Flight and the first
// step's context (context.WithoutCancel), not a channel for waiters that
// never come: the channel is made when a caller first waits (wait). It
// cost 3 allocations when join made the channel for every flight.
func TestDoThenAnsweredAllocs(t *testing.T) {
	var g Group[int]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := func(context.Context, *Flight[int]) (int, Next[int], error) {
		return 1, Next[int]{}, nil
	}
	n := testing.AllocsPerRun(200, func() {
		if v, leader, err := g.DoThen(ctx, "k", first); v != 1 || !leader || err != nil {
			t.Fatal(v, leader, err)
		}
	})
	if n > 2 {
		t.Errorf("%.1f allocations per answered DoThen, want at most 2", n)
	}
}

// BenchmarkDoThenAnswered is the flight of an L2 hit: a leader whose
// first step answers.
func BenchmarkDoThenAnswered(b *testing.B) {
	var g Group[int]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := func(context.Context, *Flight[int]) (int, Next[int], error) {
		return 1, Next[int]{}, nil
	}
	b.ReportAllocs()
	for b.Loop() {
		if v, _, err := g.DoThen(ctx, "k", first); v != 1 || err != nil {
			b.Fatal(v, err)
		}
	}
}
