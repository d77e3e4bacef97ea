package route_test

import (
	"testing"

	"github.com/sidecache/sidecache/internal/route"
)

// TestAppendLists: a path is a list endpoint when a split route's pattern
// takes it (whatever the split route's methods) or it is a batch route's
// bulk path (its query aside, as configured or folded); one endpoint named
// twice is listed once, under the larger bound.
func TestAppendLists(t *testing.T) {
	tab, err := route.Compile([]route.Spec{
		{Name: "user", Pattern: "/users/{id}", TTL: 60e9, Batch: &route.Batch{Path: "/users?active=1", Param: "ids", IDField: "id"}},
		{Name: "users", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user", MaxIDs: 5000}},
		{Name: "org-users", Pattern: "/orgs/{org}/users", Split: &route.Split{Param: "uid", RouteName: "user", MaxIDs: 7}},
		{Name: "item", Pattern: "/items/{id}", TTL: 60e9, Batch: &route.Batch{Path: "/Bulk/Items", Param: "ids", IDField: "id"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path  string
		param string
		name  string
		max   int
	}{
		{"/users", "ids", "user", 5000},
		{"/orgs/acme/users", "uid", "user", 7},
		{"/Bulk/Items", "ids", "item", route.DefaultSplitMaxIDs},
		{"/bulk/items", "ids", "item", route.DefaultSplitMaxIDs},
		{"/users/1", "", "", 0},
		{"/BULK/items", "", "", 0}, // the caller folds it: /bulk/items
	} {
		ls := tab.AppendLists(nil, tc.path)
		if tc.name == "" {
			if len(ls) != 0 {
				t.Errorf("%s: lists %+v, want none", tc.path, ls)
			}
			continue
		}
		if len(ls) != 1 || ls[0].Param != tc.param || ls[0].Target.Name != tc.name || ls[0].MaxIDs != tc.max {
			t.Errorf("%s: lists %+v, want %s of %s up to %d", tc.path, ls, tc.param, tc.name, tc.max)
		}
	}
}
