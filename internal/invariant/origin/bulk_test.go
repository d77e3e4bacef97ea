package origin_test

import (
	"testing"

	"github.com/sidecache/sidecache/internal/invariant/origin"
)

// TestCrowdRound: the origin tells a crowd round's bulk calls by their
// ids, good or bad, and no ordinary round's id passes for one.
func TestCrowdRound(t *testing.T) {
	for id, want := range map[string]int{"100001": 0, "195006": 95, "171096": 71, "80009592296622685407": 95, "80000700000000000000": 7} {
		if k, ok := origin.CrowdRound(id); !ok || k != want {
			t.Errorf("CrowdRound(%q) = %d, %v; want %d", id, k, ok, want)
		}
	}
	for _, id := range []string{"1", "64", "99999999999999999999", "90009592296622685407", "x", ""} {
		if k, ok := origin.CrowdRound(id); ok {
			t.Errorf("CrowdRound(%q) = %d, want none", id, k)
		}
	}
}
