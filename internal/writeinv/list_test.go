package writeinv_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sidecache/sidecache/internal/route"
	"github.com/sidecache/sidecache/internal/surrogate"
	"github.com/sidecache/sidecache/internal/writeinv"
)

// listTable is the README's users example: a batch route whose bulk path
// is also its split list's, a per-ID write route, a route tagged as the
// user under another URI, and an items batch route whose bulk path no
// split route shares.
func listTable(t *testing.T, maxIDs int) *route.Table {
	t.Helper()
	tab, err := route.Compile([]route.Spec{
		{Name: "user", Pattern: "/users/{id:[0-9]+}", TTL: 60e9, Tags: []string{"user:{id}"},
			Batch: &route.Batch{Path: "/bulk/users", Param: "ids", IDField: "id", MaxSize: 2}},
		{Name: "user-summary", Pattern: "/users/{id}/summary", TTL: 60e9, Tags: []string{"user:{id}"}},
		{Name: "user-write", Methods: []string{http.MethodPatch, http.MethodDelete}, Pattern: "/users/{id:[0-9]+}", Invalidate: []string{"profile:{id}"}},
		{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user", MaxIDs: maxIDs}},
		{Name: "item", Pattern: "/items/{id}", TTL: 60e9, Batch: &route.Batch{Path: "/Bulk/Items?active=1", Param: "item_ids", IDField: "id"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func uris(paths ...string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, surrogate.FoldedURITag(p))
	}
	return out
}

// TestListWrite: a write to a list endpoint (a split route's path, a
// batch route's bulk path) drops, for each id its query names however it
// names it, what a write to the id's own path drops (its URI, the per-ID
// write route's invalidate tags) and the per-ID route's tags; on the
// answers a write to the path itself drops on, and no others. On the code
// before it, DELETE /users?ids=1,2 dropped nothing of users 1 and 2.
func TestListWrite(t *testing.T) {
	one := append([]string{"user:1", "profile:1"}, uris("/users/1")...)
	two := append([]string{"user:2", "profile:2"}, uris("/users/2")...)
	both := append(slices.Clone(one), two...)
	cases := []struct {
		name, method, target string
		code                 int
		want                 []string // exactly, in any order
	}{
		{"split path, commas", http.MethodDelete, "/users?ids=1,2", 204, both},
		{"PATCH, repeated", http.MethodPatch, "/users?ids=1&ids=2", 200, both},
		{"the bulk path", http.MethodDelete, "/bulk/users?ids=2,1", 200, both},
		{"array forms, any case, blanks, empties", http.MethodDelete, "/users?ids%5B%5D=%201&IDS[0]=2,,&x=3", 200, both},
		{"pairs split at ';'", http.MethodDelete, "/users?ids=1;ids=2", 200, both},
		{"an escaped comma", http.MethodDelete, "/users?ids=1%2C2", 200, both},
		{"another spelling of the path", http.MethodDelete, "/Users/?ids=1,2", 200, both},
		// PUT is no per-ID write route's method: the read route's tags
		// and the URIs still go.
		{"a method no write route takes", http.MethodPut, "/users?ids=1", 200, []string{"user:1", surrogate.FoldedURITag("/users/1")}},
		{"a gateway's 502", http.MethodDelete, "/users?ids=1", 502, one},
		{"no answer", http.MethodDelete, "/users?ids=1", 0, one},
		{"refused", http.MethodDelete, "/users?ids=1", 409, nil},
		{"no ids", http.MethodDelete, "/users?other=1", 200, nil},
		{"another param", http.MethodDelete, "/users?idsx=1&xids=2", 200, nil},
		// The bulk path as configured, query and case aside.
		{"a bulk path alone", http.MethodPost, "/bulk/items?item_ids=7", 200, uris("/items/7")},
		{"its folded spelling", http.MethodPost, "/bulk/ITEMS?item_ids=7", 200, uris("/items/7")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "http://app.test"+tc.target, nil)
			p, ok := writeinv.New(writeinv.Options{Table: listTable(t, 3), MaxKey: 200, Upstream: "upstream.test"}, r)
			if !ok || p.TooManyIDs() {
				t.Fatalf("plan %v, too many ids %v", ok, p.TooManyIDs())
			}
			got, _ := p.Tags(tc.code, nil)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			want = slices.Compact(want)
			if !slices.Equal(got, want) {
				t.Errorf("tags %q, want %q", got, want)
			}
		})
	}
}

// TestListWriteSpellings: each id is spelled as a path id is, so every
// integer a stack reads it as loses its entries.
func TestListWriteSpellings(t *testing.T) {
	r := httptest.NewRequest(http.MethodDelete, "http://app.test/users?ids=05,0x7,9-acme", nil)
	p, _ := writeinv.New(writeinv.Options{Table: listTable(t, 3), MaxKey: 200}, r)
	got, _ := p.Tags(200, nil)
	for _, w := range append([]string{"user:5", "profile:5", "user:0", "user:7", "profile:7", "user:9", "profile:9"}, uris("/users/5", "/users/0", "/users/7", "/users/9")...) {
		if !slices.Contains(got, w) {
			t.Errorf("tags %q lack %q", got, w)
		}
	}
}

// TestListWriteBound: a write naming more distinct ids than the list
// endpoint takes (split.max_ids; a repeated id counts once), or ids whose
// paths read as too many spellings, is refused unsent; a bulk path's bound
// is at least route.DefaultSplitMaxIDs, whatever its batch.max_size.
func TestListWriteBound(t *testing.T) {
	for _, tc := range []struct {
		target string
		over   bool
	}{
		{"/users?ids=1,2,3,1", false},
		{"/users?ids=1,2&ids=3,4", true},
		{"/users?ids=" + strings.Repeat("0x1/", 8), true},
		{"/bulk/users?ids=1,2,3,4", false},
		{"/bulk/users?ids=" + ids(route.DefaultSplitMaxIDs), false},
		{"/bulk/users?ids=" + ids(route.DefaultSplitMaxIDs+1), true},
	} {
		p, ok := writeinv.New(writeinv.Options{Table: listTable(t, 3), MaxKey: 200}, httptest.NewRequest(http.MethodDelete, "http://app.test"+tc.target, nil))
		if !ok || p.TooManyIDs() != tc.over {
			t.Errorf("%.60s: too many ids %v, want %v", tc.target, p.TooManyIDs(), tc.over)
		}
		if tc.over && p.MaxIDs() == 0 {
			t.Errorf("%.60s: no bound named", tc.target)
		}
	}
	// Nothing cached: no entry to drop, no bound to refuse by.
	p, _ := writeinv.New(writeinv.Options{Table: listTable(t, 3), MaxKey: 200, NoURIs: true}, httptest.NewRequest(http.MethodDelete, "http://app.test/users?ids=1,2,3,4", nil))
	if p.TooManyIDs() {
		t.Error("refused without a cache")
	}
}

// ids are the ids 1 to n, comma-separated.
func ids(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(i + 1))
	}
	return b.String()
}
