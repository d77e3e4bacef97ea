package cachestatus

import (
	"testing"
	"time"
)

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

// A fresh hit's member is the one built for it, whatever its ttl (the
// sub-second part too, and ttls hitTTLs seconds apart, which share a
// place), and a hit whose member was made already costs no allocation;
// a stale or otherwise different member is not kept.
func TestHitMembers(t *testing.T) {
	for _, tier := range []string{"l1", "l2"} {
		for _, ttl := range []time.Duration{0, 999 * time.Millisecond, time.Second, 59*time.Second + 1, hitTTLs * time.Second, (hitTTLs + 1) * time.Second, time.Second, 24 * time.Hour} {
			s := Member{Hit: true, HasTTL: true, TTL: ttl, Detail: tier}
			if _, _, ok := s.hit(); !ok {
				t.Fatalf("%+v is not a kept hit", s)
			}
			for range 2 {
				if got, want := s.String(), s.build(); got != want {
					t.Fatalf("%+v: %q, want %q", s, got, want)
				}
			}
		}
	}
	s := Member{Hit: true, HasTTL: true, TTL: 42 * time.Second, Detail: "l2"}
	if got := s.String(); got != "sidecache; hit; ttl=42; detail=l2" {
		t.Fatalf("%q", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = s.String() }); n != 0 {
		t.Errorf("a hit's member allocates %v times, want 0", n)
	}
	for _, s := range []Member{
		{Hit: true, HasTTL: true, TTL: -time.Second, Detail: "l1"},
		{Fwd: "stale", HasTTL: true, TTL: -time.Second, Detail: "stale-while-revalidate"},
		{Hit: true, HasTTL: true, Detail: "l3"},
		{Hit: true, Detail: "l1"},
		{Hit: true, HasTTL: true, Detail: "l1", Collapsed: true},
	} {
		if _, _, ok := s.hit(); ok {
			t.Errorf("%+v is kept", s)
		}
	}
}
