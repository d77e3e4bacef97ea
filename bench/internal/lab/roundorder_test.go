package lab

import (
	"slices"
	"testing"
)

// Each round, the sidecars of a run take turns to go first, each keeping
// its entries' order (a batch row's miss, bound and split), and every
// other entry keeps its place: a floor that reads what the first
// sidecar's miss asked still comes after the run.
func TestRoundOrderRotatesSidecars(t *testing.T) {
	// hit: a1 b1 c1 nginx; batch: a-miss a-split b-miss b-split c-miss c-split floor
	entries := []cpuEntry{
		{server: "a hit", sidecar: 1}, {server: "b hit", sidecar: 2}, {server: "c hit", sidecar: 3}, {server: "nginx"},
		{server: "a miss", sidecar: 1}, {server: "a split", sidecar: 1},
		{server: "b miss", sidecar: 2}, {server: "b split", sidecar: 2},
		{server: "c miss", sidecar: 3}, {server: "c split", sidecar: 3},
		{server: "floor"},
	}
	want := map[int][]string{
		1: {"a hit", "b hit", "c hit", "nginx", "a miss", "a split", "b miss", "b split", "c miss", "c split", "floor"},
		2: {"b hit", "c hit", "a hit", "nginx", "b miss", "b split", "c miss", "c split", "a miss", "a split", "floor"},
		3: {"c hit", "a hit", "b hit", "nginx", "c miss", "c split", "a miss", "a split", "b miss", "b split", "floor"},
		4: {"a hit", "b hit", "c hit", "nginx", "a miss", "a split", "b miss", "b split", "c miss", "c split", "floor"},
	}
	for round := 1; round <= 4; round++ {
		var got []string
		for _, i := range roundOrder(entries, 3, round) {
			got = append(got, entries[i].server)
		}
		if !slices.Equal(got, want[round]) {
			t.Errorf("round %d: %v\nwant %v", round, got, want[round])
		}
	}
}
