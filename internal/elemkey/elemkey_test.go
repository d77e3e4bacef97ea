package elemkey_test

import (
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/elemkey"
	"github.com/sidecache/sidecache/internal/route"
	"github.com/sidecache/sidecache/internal/surrogate"
)

func batchRoute(t *testing.T, tags ...string) *route.Route {
	t.Helper()
	tab, err := route.Compile([]route.Spec{{Name: "user", Pattern: "/users/{id}", TTL: time.Minute, Tags: tags,
		Batch: &route.Batch{Path: "/users", Param: "ids", IDField: "id"}}})
	if err != nil {
		t.Fatal(err)
	}
	return tab.Routes()[0]
}

// TestLayout: an element's strings are those a per-ID fetch of its id
// would have, laid out in the room Room asks for without an allocation,
// and in one allocation without room.
func TestLayout(t *testing.T) {
	rt := batchRoute(t, "user:{id}", "users")
	frame := cachekey.NewFrame(httptest.NewRequest("GET", "http://api.test/users/", nil), &rt.Key)
	ids := []string{"7", "42"}
	room := make([]byte, 0, elemkey.Room(rt, ids, &frame))
	ps := route.Params{{Key: "id", Value: "42"}}
	var arr [elemkey.MaxTags]string
	uri, k, tags := elemkey.Layout(rt, "42", ps, &frame, room, &arr)
	want := cachekey.Build(httptest.NewRequest("GET", "http://api.test/users/42", nil), &rt.Key)
	if uri != surrogate.URITagPrefix+"/users/42" || k != want || !slices.Equal(tags, []string{"user:42", "users"}) {
		t.Fatalf("Layout: %q %q %q, want key %q", uri, k, tags, want)
	}
	if n := testing.AllocsPerRun(100, func() { elemkey.Layout(rt, "42", ps, &frame, room, &arr) }); n != 0 {
		t.Errorf("in room: %.0f allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { elemkey.Layout(rt, "42", ps, &frame, nil, &arr) }); n != 1 {
		t.Errorf("without room: %.0f allocations, want 1", n)
	}
	if u2, k2, _ := elemkey.Layout(rt, "42", ps, &frame, nil, &arr); u2 != uri || k2 != k {
		t.Errorf("without room: %q %q", u2, k2)
	}
	many := batchRoute(t, "a:{id}", "b:{id}", "c:{id}", "d:{id}", "e:{id}")
	if _, _, tags := elemkey.Layout(many, "42", ps, &frame, nil, &arr); tags != nil {
		t.Errorf("more than MaxTags templates: %q, want nil", tags)
	}
}
