package headerbudget

import "testing"

type reader struct{ cuts int }

func (r *reader) Cut() { r.cuts++ }

// TestLargestCutFirstGrowerKept: over the bound, the largest other
// section is cut (among equals, the one that grew longest ago), never the
// one growing; the cut one learns it at its next Grow or End, and what
// is held stays within the bound.
func TestLargestCutFirstGrowerKept(t *testing.T) {
	b := New(100)
	var hs [4]Hold
	var rs [4]reader
	for i, n := range []int64{40, 40, 10} {
		if b.Grow(&hs[i], &rs[i], n) {
			t.Fatalf("section %d cut on its first growth under the bound", i)
		}
	}
	if b.Held() != 90 || b.Conns() != 3 {
		t.Fatalf("held %d in %d, want 90 in 3", b.Held(), b.Conns())
	}
	// 30 more: over by 20; the two of 40 are equal, the first grew first.
	b.Grow(&hs[3], &rs[3], 30)
	if rs[0].cuts != 1 || rs[1].cuts != 0 || rs[2].cuts != 0 || rs[3].cuts != 0 {
		t.Fatalf("cuts %v, want only the first", rs)
	}
	if b.Held() != 80 || b.Conns() != 3 {
		t.Fatalf("held %d in %d, want 80 in 3", b.Held(), b.Conns())
	}
	if !b.Grow(&hs[0], &rs[0], 50) {
		t.Fatal("the cut section grew on, not told it was cut")
	}
	if !b.End(&hs[0]) || b.End(&hs[0]) {
		t.Fatal("End: the cut not reported once")
	}
	// One growing section larger than the whole bound is kept: the others go.
	b.Grow(&hs[3], &rs[3], 500)
	if rs[1].cuts != 1 || rs[2].cuts != 1 || rs[3].cuts != 0 || b.Held() != 500 || b.Conns() != 1 {
		t.Fatalf("cuts %v, held %d in %d; want 1 and 2 cut, 500 held in 1", rs, b.Held(), b.Conns())
	}
	if b.End(&hs[3]) || b.Held() != 0 || b.Conns() != 0 {
		t.Fatalf("after End: held %d in %d", b.Held(), b.Conns())
	}
	// A lowered bound cuts at once.
	b.End(&hs[1])
	b.End(&hs[2])
	b.Grow(&hs[1], &rs[1], 60)
	b.Grow(&hs[2], &rs[2], 30)
	b.SetMax(50)
	if rs[1].cuts != 2 || rs[2].cuts != 1 || b.Held() != 30 || b.Max() != 50 {
		t.Fatalf("after SetMax(50): cuts %v, held %d, max %d", rs, b.Held(), b.Max())
	}
}
