package route

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cachekey"
)

// specExample is the route list of the example in docs/configuration.md
// (routes).
func specExample() []Spec {
	return []Spec{
		{Name: "client", Methods: []string{"GET"}, Pattern: "/clients/{id}", TTL: 5 * time.Minute,
			StaleWhileRevalidate: 30 * time.Second, StaleIfError: 10 * time.Minute, NegativeTTL: 10 * time.Second,
			Key:  cachekey.Options{Query: []string{"fields"}, Headers: []string{"accept-language"}},
			Tags: []string{"client:{id}"}},
		{Name: "client-write", Methods: []string{"PATCH", "PUT", "DELETE"}, Pattern: "/clients/{id}",
			Invalidate: []string{"client:{id}"}},
		{Name: "user", Pattern: "/users/{id}", TTL: time.Minute,
			Batch: &Batch{Path: "/users", Param: "ids", MaxSize: 100, MaxWait: 2 * time.Millisecond, IDField: "id"}},
		{Name: "users-list", Pattern: "/users", Split: &Split{Param: "ids", RouteName: "user"}},
	}
}

func mustCompile(t testing.TB, specs []Spec) *Table {
	t.Helper()
	tb, err := Compile(specs)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func TestCompileSpecExample(t *testing.T) {
	tb := mustCompile(t, specExample())

	client := tb.Route("client")
	if client == nil || tb.Route("nope") != nil {
		t.Fatal("Route by name")
	}
	if want := []string{"Accept-Language"}; !slices.Equal(client.Key.Headers, want) {
		t.Errorf("key headers = %q, want %q", client.Key.Headers, want)
	}
	if got := client.Tags[0].Expand(Params{{"id", "7"}}); got != "client:7" {
		t.Errorf("tag = %q", got)
	}
	if !client.Cacheable() || tb.Route("client-write").Cacheable() || tb.Route("users-list").Cacheable() {
		t.Error("Cacheable: want only client and user")
	}
	user := tb.Route("user")
	if user.Batch.IDParam != "id" {
		t.Errorf("batch id param = %q", user.Batch.IDParam)
	}
	if !slices.Equal(user.Methods, []string{"GET", "HEAD"}) {
		t.Errorf("default methods = %q", user.Methods)
	}
	if tb.Route("users-list").Split.Route != user {
		t.Error("split not resolved to the user route")
	}
	var names []string
	for _, r := range tb.Routes() {
		names = append(names, r.Name)
	}
	if want := []string{"client", "client-write", "user", "users-list"}; !slices.Equal(names, want) {
		t.Errorf("Routes order = %q", names)
	}
}

func TestMatch(t *testing.T) {
	tb := mustCompile(t, []Spec{
		{Name: "me", Pattern: "/clients/me", Methods: []string{"GET"}, TTL: time.Second},
		{Name: "client", Pattern: "/clients/{id}", Methods: []string{"GET", "HEAD"}, TTL: time.Second},
		{Name: "client-write", Pattern: "/clients/{id}", Methods: []string{"put", "DELETE"}},
		{Name: "numeric", Pattern: "/n/{n:[0-9]+}", TTL: time.Second},
		{Name: "any-n", Pattern: "/n/{x}", TTL: time.Second},
		{Name: "static", Pattern: "/static/*", TTL: time.Second},
		{Name: "post-only", Pattern: "/jobs", Methods: []string{"POST"}},
		{Name: "jobs", Pattern: "/jobs"},
	})
	tests := []struct {
		method, path string
		route        string // "" for no match
		params       Params
	}{
		{"GET", "/clients/me", "me", nil},  // first match wins over the param route
		{"HEAD", "/clients/me", "me", nil}, // a GET route serves HEAD (RFC 9110 §9.3.2)
		{"HEAD", "/jobs", "jobs", nil},
		{"HEAD", "/n/12", "numeric", Params{{"n", "12"}}},
		{"GET", "/clients/42", "client", Params{{"id", "42"}}},
		{"PUT", "/clients/42", "client-write", Params{{"id", "42"}}},
		{"PATCH", "/clients/42", "", nil},
		{"get", "/clients/42", "", nil}, // methods are case-sensitive (RFC 9110 §9.1)
		{"GET", "/clients/42/", "", nil},
		{"GET", "/clients", "", nil},
		{"GET", "/n/12", "numeric", Params{{"n", "12"}}},
		{"GET", "/n/x1", "any-n", Params{{"x", "x1"}}},
		{"GET", "/static/a/b.css", "static", Params{{"*", "a/b.css"}}},
		{"GET", "/static/", "static", Params{{"*", ""}}},
		{"GET", "/static", "", nil},
		{"POST", "/jobs", "post-only", nil},
		{"GET", "/jobs", "jobs", nil},
		{"GET", "/other", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r, ps, ok := tb.Match(tt.method, tt.path)
			if tt.route == "" {
				if ok || r != nil {
					t.Fatalf("matched %q, want none", r.Name)
				}
				return
			}
			if !ok || r.Name != tt.route || !reflect.DeepEqual(ps, tt.params) {
				name := "<nil>"
				if r != nil {
					name = r.Name
				}
				t.Fatalf("Match = %s %v %v, want %s %v", name, ps, ok, tt.route, tt.params)
			}
			var buf [4]Param
			r2, ps2, ok2 := tb.MatchAppend(buf[:0], tt.method, tt.path)
			if r2 != r || !ok2 || len(ps2) != len(ps) || len(ps) > 0 && !reflect.DeepEqual(ps2, ps) {
				t.Fatalf("MatchAppend = %v %v, Match = %v", ps2, ok2, ps)
			}
		})
	}
}

func TestMatchParamsNotShared(t *testing.T) {
	tb := mustCompile(t, []Spec{{Name: "c", Pattern: "/c/{id}", TTL: time.Second}})
	_, a, _ := tb.Match("GET", "/c/1")
	_, b, _ := tb.Match("GET", "/c/2")
	if a.Get("id") != "1" || b.Get("id") != "2" {
		t.Errorf("params overwritten: %v %v", a, b)
	}
}

func TestCompileErrors(t *testing.T) {
	ok := Spec{Name: "ok", Pattern: "/ok/{id}", TTL: time.Second,
		Batch: &Batch{Path: "/ok", Param: "ids", IDField: "id"}}
	tests := []struct {
		name  string
		specs []Spec
		want  []string
	}{
		{"no name", []Spec{{Pattern: "/x"}}, []string{"route #1: no name"}},
		{"duplicate name", []Spec{{Name: "a", Pattern: "/x"}, {Name: "a", Pattern: "/y"}}, []string{`route "a": name used twice`}},
		{"bad pattern", []Spec{{Name: "a", Pattern: "x/{id"}}, []string{`route "a": path "x/{id": must begin with '/'`}},
		{"bad method", []Spec{{Name: "a", Pattern: "/x", Methods: []string{"GE T"}}}, []string{`route "a": methods: "GE T" is not a method`}},
		{"negative ttl", []Spec{{Name: "a", Pattern: "/x", TTL: -time.Second}}, []string{`route "a": ttl: negative`}},
		{"key exclusive", []Spec{{Name: "a", Pattern: "/x", Key: cachekey.Options{AllQuery: true, Query: []string{"q"}}}}, []string{`route "a": key: all query`}},
		{"bad key header", []Spec{{Name: "a", Pattern: "/x", Key: cachekey.Options{Headers: []string{"X: y"}}}}, []string{`route "a": key: headers: "X: y"`}},
		{"unknown tag param", []Spec{{Name: "a", Pattern: "/c/{id}", Tags: []string{"c:{cid}"}}}, []string{`route "a": tags: template "c:{cid}" names {cid}, which the path lacks`}},
		{"bad tag", []Spec{{Name: "a", Pattern: "/c/{id}", Tags: []string{"c:{id"}}}, []string{`route "a": tags: template "c:{id"`}},
		{"unknown invalidate param", []Spec{{Name: "a", Pattern: "/c/{id}", Methods: []string{"PUT"}, Invalidate: []string{"c:{x}"}}}, []string{`route "a": invalidate: template "c:{x}" names {x}`}},
		{"invalidate on safe route", []Spec{{Name: "a", Pattern: "/c/{id}", Invalidate: []string{"c:{id}"}}}, []string{`route "a": invalidate: the route has no unsafe method`}},
		{"batch needs one param", []Spec{{Name: "a", Pattern: "/o/{org}/u/{id}", Batch: &Batch{Path: "/u", Param: "ids", IDField: "id"}}}, []string{`route "a": batch: the path must have exactly one named param`}},
		{"batch wildcard", []Spec{{Name: "a", Pattern: "/u/*", Batch: &Batch{Path: "/u", Param: "ids", IDField: "id"}}}, []string{`route "a": batch: the path must have exactly one named param`}},
		{"batch id param mismatch", []Spec{{Name: "a", Pattern: "/u/{id}", Batch: &Batch{Path: "/u", Param: "ids", IDField: "id", IDParam: "uid"}}}, []string{`route "a": batch: id param "uid"`}},
		{"batch fields", []Spec{{Name: "a", Pattern: "/u/{id}", Batch: &Batch{Path: "u", MaxSize: -1, MaxWait: -1}}},
			[]string{`route "a": batch: path "u"`, `route "a": batch: no param`, `route "a": batch: no id_field`, `route "a": batch: negative max_size`, `route "a": batch: negative max_wait`}},
		{"batch needs GET", []Spec{{Name: "a", Pattern: "/u/{id}", Methods: []string{"POST"}, Batch: &Batch{Path: "/u", Param: "ids", IDField: "id"}}}, []string{`route "a": batch: the route must allow GET`}},
		{"batch and split", []Spec{ok, {Name: "a", Pattern: "/u/{id}", Batch: &Batch{Path: "/u", Param: "ids", IDField: "id"}, Split: &Split{Param: "ids", RouteName: "ok"}}}, []string{`route "a": batch and split are exclusive`}},
		{"split unknown route", []Spec{{Name: "a", Pattern: "/u", Split: &Split{Param: "ids", RouteName: "nope"}}}, []string{`route "a": split: no route named "nope"`}},
		{"split no param", []Spec{ok, {Name: "a", Pattern: "/u", Split: &Split{RouteName: "ok"}}}, []string{`route "a": split: no param`}},
		{"split target without batch", []Spec{{Name: "t", Pattern: "/t/{id}"}, {Name: "a", Pattern: "/u", Split: &Split{Param: "ids", RouteName: "t"}}}, []string{`route "a": split: route "t" has no batch settings`}},
		{"split negative max_ids", []Spec{ok, {Name: "a", Pattern: "/u", Split: &Split{Param: "ids", RouteName: "ok", MaxIDs: -1}}}, []string{`route "a": split: negative max_ids -1`}},
		{"split self", []Spec{{Name: "a", Pattern: "/u", Split: &Split{Param: "ids", RouteName: "a"}}}, []string{`route "a": split: a route cannot split into itself`}},
		{"every problem at once", []Spec{{Name: "a", Pattern: "a"}, {Name: "b", Pattern: "/b", TTL: -1}},
			[]string{`route "a": path "a"`, `route "b": ttl: negative`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb, err := Compile(tt.specs)
			if err == nil {
				t.Fatalf("Compile succeeded: %v", tb.Routes())
			}
			if tb != nil {
				t.Error("Compile returned a table with an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestCompileKeyNormalised(t *testing.T) {
	specs := []Spec{{Name: "a", Pattern: "/a", TTL: time.Second,
		Key: cachekey.Options{Query: []string{"z", "a", "z"}, Headers: []string{"x-b", "X-A", "x-b"}}}}
	tb := mustCompile(t, specs)
	k := tb.Route("a").Key
	if !slices.Equal(k.Query, []string{"a", "z"}) || !slices.Equal(k.Headers, []string{"X-A", "X-B"}) {
		t.Errorf("key = %+v", k)
	}
	if specs[0].Key.Headers[0] != "x-b" {
		t.Error("Compile modified the spec")
	}
}

func TestCacheable(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want bool
	}{
		{"ttl", Spec{Pattern: "/a", TTL: time.Second}, true},
		{"no lifetime", Spec{Pattern: "/a"}, false},
		{"stale only", Spec{Pattern: "/a", StaleIfError: time.Minute}, true},
		{"negative only", Spec{Pattern: "/a", NegativeTTL: time.Second}, true},
		{"head only", Spec{Pattern: "/a", Methods: []string{"HEAD"}, TTL: time.Second}, true},
		{"write", Spec{Pattern: "/a", Methods: []string{"PUT"}, TTL: time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.spec.Name = "r"
			if got := mustCompile(t, []Spec{tt.spec}).Route("r").Cacheable(); got != tt.want {
				t.Errorf("Cacheable = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRoutesJSON(t *testing.T) {
	tb := mustCompile(t, specExample())
	b, err := json.Marshal(tb.Routes())
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("%d routes in %s", len(got), b)
	}
	client, user, list := got[0], got[2], got[3]
	checks := []struct {
		name     string
		got, exp any
	}{
		{"name", client["name"], "client"},
		{"path", client["path"], "/clients/{id}"},
		{"ttl", client["ttl"], "5m0s"},
		{"swr", client["stale_while_revalidate"], "30s"},
		{"negative", client["negative_ttl"], "10s"},
		{"tags", client["tags"], []any{"client:{id}"}},
		{"params", client["params"], []any{"id"}},
		{"key", client["key"], map[string]any{"query": []any{"fields"}, "headers": []any{"Accept-Language"}, "host": "request"}},
		{"cacheable", client["cacheable"], true},
		{"invalidate", got[1]["invalidate"], []any{"client:{id}"}},
		{"batch", user["batch"], map[string]any{"path": "/users", "param": "ids", "id_field": "id", "max_size": float64(100), "max_wait": "2ms", "max_in_flight": float64(0), "max_route_in_flight": float64(0)}},
		{"split", list["split"], map[string]any{"param": "ids", "route": "user", "max_ids": float64(DefaultSplitMaxIDs)}},
		{"methods", user["methods"], []any{"GET", "HEAD"}},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.exp) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.exp)
		}
	}
	tj, err := json.Marshal(tb)
	if err != nil || string(tj) != string(b) {
		t.Errorf("Table JSON %s differs from Routes JSON: %v", tj, err)
	}
}

func TestMatchAllocs(t *testing.T) {
	tb := mustCompile(t, specExample())
	if n := testing.AllocsPerRun(100, func() { tb.Match("GET", "/users/42") }); n > 1 {
		t.Errorf("Match with a param allocates %v times, want <= 1", n)
	}
	if n := testing.AllocsPerRun(100, func() { tb.Match("GET", "/users") }); n != 0 {
		t.Errorf("Match without params allocates %v times, want 0", n)
	}
	var buf [4]Param
	if n := testing.AllocsPerRun(100, func() { tb.MatchAppend(buf[:0], "GET", "/users/42") }); n != 0 {
		t.Errorf("MatchAppend allocates %v times, want 0", n)
	}
}

func BenchmarkMatch(b *testing.B) {
	specs := append([]Spec{
		{Name: "health", Pattern: "/healthz", TTL: time.Second},
		{Name: "orders", Pattern: "/clients/{id}/orders/{oid:[0-9]+}", TTL: time.Second},
	}, specExample()...)
	tb := mustCompile(b, specs)
	for _, bc := range []struct{ name, method, path string }{
		{"param", "GET", "/clients/42"},
		{"regexp", "GET", "/clients/42/orders/7"},
		{"static", "GET", "/users"},
		{"miss", "GET", "/nowhere/at/all"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tb.Match(bc.method, bc.path)
			}
		})
	}
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		var buf [4]Param
		for b.Loop() {
			tb.MatchAppend(buf[:0], "GET", "/clients/42")
		}
	})
}
