package config

import (
	"testing"
	"time"
)

// TestWriteHoldFollowsMaxLag: coherence.write_hold left unset is max_lag,
// the given one or its default, and deliberately so (unlike lease_ttl's
// source, max_lag and write_hold both need a restart, so no reload can
// part them): once the replicas have heard nothing for max_lag, each
// serves only entries fetched within the last max_lag, so a write held
// that long in an outage of the whole Redis is answered when no replica
// can serve a copy fetched before it; a shorter hold answers it while
// they still may, a longer one only delays it. Set, it is kept, 0s
// included (never wait).
func TestWriteHoldFollowsMaxLag(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want time.Duration
	}{
		{minimal, time.Second},
		{minimal + "coherence: {max_lag: 3s}\n", 3 * time.Second},
		{minimal + "coherence: {max_lag: 3s, write_hold: 500ms}\n", 500 * time.Millisecond},
		{minimal + "coherence: {max_lag: 3s, write_hold: 0s}\n", 0},
	} {
		c, err := Parse([]byte(tc.yaml), "t.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Coherence.WriteHold.D(); got != tc.want {
			t.Errorf("%q: write_hold %v, want %v", tc.yaml, got, tc.want)
		}
	}
}
