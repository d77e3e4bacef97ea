package invariant

import (
	"math/rand/v2"
	"testing"

	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// TestMidSplitCountsOnlyItsRequests: a round appends requests after its
// mid-round fault has split reqs (drawAgents, drawListWrites); their
// answers must count neither as "before the fault" nor as "during it".
// Counted as early answers they overran the channel sized for the split
// and blocked the round for good (the all-features soak hung 13 minutes).
func TestMidSplitCountsOnlyItsRequests(t *testing.T) {
	for seed := uint64(0); seed < 32; seed++ { // splits with room left after reqs[:first] show the defect
		reqs := make([]*traffic.Request, 6)
		for i := range reqs {
			reqs[i] = &traffic.Request{Kind: "read"}
		}
		s := newMidSplit(rand.New(rand.NewPCG(seed, 1)), reqs)
		for _, q := range reqs {
			s.answered(q)
		}
		// As many late requests as the early channel has room left, so
		// that a wrong count shows as a count, not as a hang.
		for range cap(s.answers) - s.first {
			s.answered(&traffic.Request{Kind: "write"})
		}
		if got, want := len(s.answers), s.first; got != want {
			t.Errorf("seed %d: %d answers counted before the fault, want %d (the split's first %d of %d)", seed, got, want, s.first, len(reqs))
		}
		if got, want := len(s.during), len(reqs)-s.first; got != want {
			t.Errorf("seed %d: %d answers counted during the fault, want %d", seed, got, want)
		}
	}
}
