package entryblock

import (
	"slices"
	"testing"

	"github.com/sidecache/sidecache/internal/route"
)

var params = route.Params{{Key: "id", Value: "7"}, {Key: "org", Value: "acme"}}

func templates(ss ...string) []route.Template {
	var ts []route.Template
	for _, s := range ss {
		ts = append(ts, route.MustParseTemplate(s))
	}
	return ts
}

// An entry's tags are the route's tag and its templates expanded, with
// room for two URI tags; a route of at most one template gets the entry
// and its tags in one allocation.
func TestNew(t *testing.T) {
	for _, tc := range []struct {
		tpl    []string
		want   []string
		allocs float64
	}{
		{nil, []string{"_route:r"}, 1},
		{[]string{"user:{id}"}, []string{"_route:r", "user:7"}, 2}, // the expanded string
		{[]string{"user:{id}", "org:{org}"}, []string{"_route:r", "user:7", "org:acme"}, 4},
	} {
		ts := templates(tc.tpl...)
		e := New("_route:r", ts, params)
		if !slices.Equal(e.Tags, tc.want) || cap(e.Tags)-len(e.Tags) < uriRoom {
			t.Errorf("%v: tags %q (cap %d), want %q and room for %d", tc.tpl, e.Tags, cap(e.Tags), tc.want, uriRoom)
		}
		if n := testing.AllocsPerRun(100, func() { _ = New("_route:r", ts, params) }); n != tc.allocs {
			t.Errorf("%v: %v allocations, want %v", tc.tpl, n, tc.allocs)
		}
	}
}

// An element's entry takes tags already expanded, and its ETag slot comes
// in the same allocation when its tags fit a block.
func TestNewElement(t *testing.T) {
	ts := templates("user:{id}")
	e, slot := NewElement("_route:r", ts, params, []string{"user:9"})
	if !slices.Equal(e.Tags, []string{"_route:r", "user:9"}) || slot == nil || len(slot) != 0 || cap(slot) != 1 {
		t.Fatalf("tags %q, slot %v (cap %d); want the expanded tag and an empty slot of 1", e.Tags, slot, cap(slot))
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = NewElement("_route:r", ts, params, []string{"user:9"}) }); n != 1 {
		t.Errorf("an element's entry, tags and slot: %v allocations, want 1", n)
	}
	big := templates("a:{id}", "b:{id}")
	e, slot = NewElement("_route:r", big, params, nil)
	if slot != nil || !slices.Equal(e.Tags, []string{"_route:r", "a:7", "b:7"}) {
		t.Errorf("a route over a block: tags %q, slot %v; want its tags and no slot", e.Tags, slot)
	}
}
