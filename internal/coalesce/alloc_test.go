//go:build !race

package coalesce

import (
	"context"
	"testing"
)

// A flight whose first step answers it (an L2 hit: DoThen's usual case)
// costs the Flight alone: its channel is made when a caller first waits
// (waitChan), which no caller of an answered flight does, and the context
// its steps run with lives in it (detached). It cost 3 allocations when
// join made the channel for every flight and each leader had its own
// context.WithoutCancel.
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
	if n > 1 {
		t.Errorf("%.1f allocations per answered DoThen, want 1 (the Flight)", n)
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

// A flight's steps look up values in its context (the request's Redis
// budget on every L2 read), which allocates nothing: it cost one
// allocation per lookup when every lookup went through
// context.WithoutCancel's Value (issue 23).
func TestDetachedValueAllocs(t *testing.T) {
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), detachedKey{}, "v"))
	defer cancel()
	var fl Flight[int]
	fl.Carry(&carrier{v: "carried"})
	ctx := fl.detach(parent)
	n := testing.AllocsPerRun(100, func() {
		if ctx.Value(detachedKey{}) != "v" || ctx.Value(carriedKey{}) != "carried" || ctx.Value(struct{}{}) != nil {
			t.Fatal("lookups")
		}
	})
	if n != 0 {
		t.Errorf("%.1f allocations per flight context's lookups, want 0", n)
	}
}
