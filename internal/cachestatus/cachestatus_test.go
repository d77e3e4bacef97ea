package cachestatus

import "testing"

// TestCommonMembersAreBuilt: each member with a place in commonMembers
// finds its own place there, whose string is the one built for it, and
// members outside the table (a hit, a ttl, another upstream status or
// detail) are built each time.
func TestCommonMembersAreBuilt(t *testing.T) {
	for i := range commonMembers {
		s := commonMember(i)
		if j, ok := s.common(); !ok || j != i {
			t.Fatalf("member %d (%+v): common() = %d, %v", i, s, j, ok)
		}
		if got, want := s.String(), s.build(); got != want {
			t.Errorf("member %+v: %q, want %q", s, got, want)
		}
	}
	for _, s := range []Member{
		{Hit: true, Fwd: "miss", FwdStatus: 200},
		{Fwd: "miss", FwdStatus: 200, HasTTL: true},
		{Fwd: "miss", FwdStatus: 500},
		{Fwd: "stale", FwdStatus: 200},
		{Fwd: "miss", FwdStatus: 200, Detail: "too-large"},
	} {
		if _, ok := s.common(); ok {
			t.Errorf("member %+v is common", s)
		}
	}
	if got, want := (Member{Fwd: "miss", FwdStatus: 200, Stored: true, Detail: "batch"}).String(), "sidecache; fwd=miss; fwd-status=200; stored; detail=batch"; got != want {
		t.Errorf("batched miss: %q, want %q", got, want)
	}
}

// A common member costs no allocation; the strings are the ones built.
func TestCommonMemberAllocates(t *testing.T) {
	s := Member{Fwd: "miss", FwdStatus: 200, Stored: true, Collapsed: true}
	if n := testing.AllocsPerRun(100, func() { _ = s.String() }); n != 0 {
		t.Errorf("a common member's String allocates %v times, want 0", n)
	}
	if got, want := s.String(), "sidecache; fwd=miss; fwd-status=200; stored; collapsed"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
