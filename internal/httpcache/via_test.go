package httpcache

import (
	"net/http"
	"slices"
	"testing"
)

// A proxy's Via member goes after the upstream's, never into the slice the
// answer arrived with, and costs no allocation on an answer without Via.
func TestAddVia(t *testing.T) {
	via := []string{"1.1 sc"}
	stored := make([]string, 1, 4)
	stored[0] = "1.1 origin"
	h := http.Header{"Via": stored}
	AddVia(h, via)
	if !slices.Equal(h["Via"], []string{"1.1 origin", "1.1 sc"}) || stored[:2][1] != "" {
		t.Errorf("Via %q, stored backing %q; want the member appended to a copy", h["Via"], stored[:2])
	}
	none := http.Header{}
	if n := testing.AllocsPerRun(100, func() { delete(none, "Via"); AddVia(none, via) }); n != 0 {
		t.Errorf("%v allocations on an answer without Via, want 0", n)
	}
	if !slices.Equal(none["Via"], via) || cap(none["Via"]) != 1 {
		t.Errorf("Via %q (cap %d), want the member, capped", none["Via"], cap(none["Via"]))
	}
	off := http.Header{}
	AddVia(off, nil)
	if _, ok := off["Via"]; ok {
		t.Error("Via added with none configured")
	}
}
