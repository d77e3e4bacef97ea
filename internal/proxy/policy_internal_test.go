package proxy

import "testing"

// TestCommonStatusesAreBuilt: each status with a place in commonStatuses
// finds its own place there, whose string is the one built for it, and
// statuses outside the table (a hit, a ttl, another upstream status or
// detail) are built each time.
func TestCommonStatusesAreBuilt(t *testing.T) {
	for i := range commonStatuses {
		s := commonStatus(i)
		if j, ok := s.common(); !ok || j != i {
			t.Fatalf("status %d (%+v): common() = %d, %v", i, s, j, ok)
		}
		if got, want := s.String(), s.build(); got != want {
			t.Errorf("status %+v: %q, want %q", s, got, want)
		}
	}
	for _, s := range []status{
		{hit: true, fwd: "miss", fwdStatus: 200},
		{fwd: "miss", fwdStatus: 200, hasTTL: true},
		{fwd: "miss", fwdStatus: 500},
		{fwd: "stale", fwdStatus: 200},
		{fwd: "miss", fwdStatus: 200, detail: "too-large"},
	} {
		if _, ok := s.common(); ok {
			t.Errorf("status %+v is common", s)
		}
	}
	if got, want := (status{fwd: "miss", fwdStatus: 200, stored: true, detail: "batch"}).String(), "sidecache; fwd=miss; fwd-status=200; stored; detail=batch"; got != want {
		t.Errorf("batched miss: %q, want %q", got, want)
	}
}
