package server

import (
	"testing"

	"github.com/sidecache/sidecache/internal/config"
)

// TestCompileRoutesCarriesSplitMaxIDs: routes[].split.max_ids reaches the
// compiled route, where the proxy bounds list requests with it.
func TestCompileRoutesCarriesSplitMaxIDs(t *testing.T) {
	tab, err := compileRoutes([]config.Route{
		{Name: "user", Path: "/users/{id}", Batch: &config.Batch{Path: "/users", Param: "ids", IDField: "id"}},
		{Name: "users-list", Path: "/users", Split: &config.Split{Param: "ids", Route: "user", MaxIDs: 7}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := tab.Route("users-list").Split.MaxIDs; got != 7 {
		t.Errorf("split max_ids = %d, want 7", got)
	}
}
