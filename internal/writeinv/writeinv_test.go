package writeinv_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/route"
	"github.com/sidecache/sidecache/internal/surrogate"
	"github.com/sidecache/sidecache/internal/writeinv"
)

func table(t *testing.T) *route.Table {
	t.Helper()
	tab, err := route.Compile([]route.Spec{
		{Name: "client-write", Methods: []string{http.MethodPatch, http.MethodPost}, Pattern: "/clients/{id:[1-9][0-9]*}",
			Invalidate: []string{"client:{id}", "clients"}},
		{Name: "client", Pattern: "/clients/{id}", TTL: 60e9, Key: cachekey.Options{AllQuery: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// TestTags: which tags a write invalidates, for which answer.
func TestTags(t *testing.T) {
	uri := surrogate.FoldedURITag("/clients/5")
	cases := []struct {
		name, method, path string
		code               int
		answer             http.Header
		maxKey             int
		want               []string // in any order
		skipped            int
	}{
		{"2xx: route tags and the URI", http.MethodPatch, "/clients/5", 204, nil, 200, []string{"client:5", "clients", uri}, 0},
		{"another spelling", http.MethodPatch, "/Clients/05/", 200, nil, 200, []string{"client:5", "clients", uri}, 0},
		// Spellings an origin reads as 5 (PostgreSQL's int4 input skips
		// blanks; Rails' find, parseInt and MySQL read leading digits),
		// and the literal one the unconstrained read route could store.
		{"blank before", http.MethodPatch, "/clients/%205", 204, nil, 200, []string{"client:5", "clients", uri, surrogate.URITag("/clients/ 5")}, 0},
		{"blank after", http.MethodPatch, "/clients/5%20", 204, nil, 200, []string{"client:5", "clients", uri, surrogate.URITag("/clients/5 ")}, 0},
		{"tab before", http.MethodPatch, "/clients/%095", 204, nil, 200, []string{"client:5", "clients", uri, surrogate.URITag("/clients/\t5")}, 0},
		{"slug suffix", http.MethodPatch, "/clients/5-acme", 204, nil, 200, []string{"client:5", "clients", uri, surrogate.URITag("/clients/5-acme")}, 0},
		{"zeros, sign and a slug", http.MethodPatch, "/clients/+005-acme", 204, nil, 200, []string{"client:5", "clients", uri, surrogate.URITag("/clients/+005-acme")}, 0},
		// An id stacks read as different integers names each: 0x5 is 5
		// to PostgreSQL 16+ and JavaScript, 0 to Ruby and MySQL (the
		// write route's pattern takes 5 alone); a full-width 5 is 5 to
		// Python's int().
		{"hex", http.MethodPatch, "/clients/0x5", 204, nil, 200, []string{"client:5", "clients", uri, surrogate.URITag("/clients/0"), surrogate.URITag("/clients/0x5")}, 0},
		{"underscores", http.MethodPatch, "/clients/1_000", 204, nil, 200, []string{"client:1", "client:1000", "clients",
			surrogate.URITag("/clients/1"), surrogate.URITag("/clients/1000"), surrogate.URITag("/clients/1_000")}, 0},
		{"full-width", http.MethodPatch, "/clients/%EF%BC%95", 204, nil, 200, []string{"client:5", "clients", uri, surrogate.URITag("/clients/\uff15")}, 0},
		{"NBSP", http.MethodPatch, "/clients/%C2%A05", 204, nil, 200, []string{"client:5", "clients", uri, surrogate.URITag("/clients/\u00a05")}, 0},
		// Every answer after which the write may have been applied drops
		// the route's tags and the URI alike (surrogate.MayBeApplied).
		{"3xx: as a 2xx", http.MethodPatch, "/clients/5", 303, nil, 200, []string{"client:5", "clients", uri}, 0},
		{"502: as a 2xx", http.MethodPatch, "/clients/5", 502, nil, 200, []string{"client:5", "clients", uri}, 0},
		{"504: as a 2xx", http.MethodPatch, "/clients/5", 504, nil, 200, []string{"client:5", "clients", uri}, 0},
		{"no answer: as a 2xx", http.MethodPatch, "/clients/5", 0, nil, 200, []string{"client:5", "clients", uri}, 0},
		{"refused: nothing", http.MethodPatch, "/clients/5", 409, nil, 200, nil, 0},
		{"500: nothing", http.MethodPatch, "/clients/5", 500, nil, 200, nil, 0},
		{"503: nothing", http.MethodPatch, "/clients/5", 503, nil, 200, nil, 0},
		// A slug that reads as no number invalidates its own URI alone.
		{"a slug", http.MethodPatch, "/clients/acme", 204, nil, 200, []string{surrogate.FoldedURITag("/clients/acme")}, 0},
		{"a Location of the same origin", http.MethodPost, "/clients/5", 201, http.Header{"Location": {"/clients/6"}}, 200,
			[]string{"client:5", "clients", uri, surrogate.FoldedURITag("/clients/6")}, 0},
		// The path too is over the bound: no entry has it, no URI tag.
		{"tags over the key bound are skipped", http.MethodPatch, "/clients/5", 200, nil, len("clients"), []string{"clients"}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "http://app.test"+tc.path, nil)
			p, ok := writeinv.New(writeinv.Options{Table: table(t), MaxKey: tc.maxKey, Upstream: "upstream.test"}, r)
			if !ok {
				t.Fatal("no plan for a write")
			}
			got, skipped := p.Tags(tc.code, tc.answer)
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("tags %q lack %q", got, w)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("tags %q, want %q", got, tc.want)
			}
			if skipped != tc.skipped {
				t.Errorf("skipped %d, want %d", skipped, tc.skipped)
			}
			if tc.code == 200 && !slices.Contains(p.Routes(), "client-write") {
				t.Errorf("routes %q", p.Routes())
			}
		})
	}
}

// TestNew: a request that invalidates nothing whatever the answer has no
// plan; an unsafe one without a cache drops its route tags alone.
func TestNew(t *testing.T) {
	tab := table(t)
	get := httptest.NewRequest(http.MethodGet, "http://app.test/clients/5", nil)
	if _, ok := writeinv.New(writeinv.Options{Table: tab, MaxKey: 200}, get); ok {
		t.Error("a GET of a route without invalidate tags has a plan")
	}
	del := httptest.NewRequest(http.MethodDelete, "http://app.test/elsewhere", nil)
	if _, ok := writeinv.New(writeinv.Options{Table: tab, MaxKey: 200, NoURIs: true}, del); ok {
		t.Error("an unsafe request of no write route, nothing cached, has a plan")
	}
	p, ok := writeinv.New(writeinv.Options{Table: tab, MaxKey: 200, NoURIs: true}, httptest.NewRequest(http.MethodPatch, "http://app.test/clients/5", nil))
	if !ok {
		t.Fatal("no plan for a write route")
	}
	if got, _ := p.Tags(200, nil); strings.Join(got, " ") != "client:5 clients" {
		t.Errorf("nothing cached: tags %q, want the route's", got)
	}
}

// TestAppliedAs: a write the app may apply as another method than its
// request line's drops the tags of the write routes its path names under
// those methods: a POST under every method they take (its form's
// _method may name any), a method override field (any spelling) under
// the method it names; a plain write its own method's alone.
func TestAppliedAs(t *testing.T) {
	tab, err := route.Compile([]route.Spec{
		{Name: "client-write", Methods: []string{http.MethodPatch, http.MethodDelete}, Pattern: "/clients/{id:[1-9][0-9]*}", Invalidate: []string{"client:{id}"}},
		{Name: "client", Pattern: "/clients/{id}", TTL: 60e9, Key: cachekey.Options{AllQuery: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	uri := surrogate.FoldedURITag("/clients/5")
	for _, tc := range []struct {
		name, method, target string
		hdr                  http.Header
		want                 []string
	}{
		{"POST: its body may say _method", http.MethodPost, "/clients/5", nil, []string{"client:5", uri}},
		{"POST ?_method", http.MethodPost, "/clients/5?_method=DELETE", nil, []string{"client:5", uri}},
		{"PUT with an override", http.MethodPut, "/clients/5", http.Header{"X-Http-Method-Override": {"patch"}}, []string{"client:5", uri}},
		{"underscore spelling", http.MethodPut, "/clients/5", http.Header{"X_method_override": {"DELETE"}}, []string{"client:5", uri}},
		{"X-HTTP-Method", http.MethodPut, "/clients/5", http.Header{"X-Http-Method": {"DELETE"}}, []string{"client:5", uri}},
		{"an override no write route takes", http.MethodPut, "/clients/5", http.Header{"X-Http-Method-Override": {"PURGE"}}, []string{uri}},
		{"another spelling of the path", http.MethodPost, "/Clients/05/", nil, []string{"client:5", uri}},
		{"PUT: its own method", http.MethodPut, "/clients/5", nil, []string{uri}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "http://app.test"+tc.target, nil)
			r.Method = tc.method
			for k, vs := range tc.hdr {
				r.Header[k] = vs
			}
			p, ok := writeinv.New(writeinv.Options{Table: tab, MaxKey: 200, Upstream: "upstream.test"}, r)
			if !ok {
				t.Fatalf("no plan, want %q", tc.want)
			}
			got, _ := p.Tags(http.StatusNoContent, nil)
			slices.Sort(got)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("tags %q, want %q", got, want)
			}
		})
	}
}
