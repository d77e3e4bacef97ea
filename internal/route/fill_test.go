package route

import "testing"

func TestPathFor(t *testing.T) {
	tests := []struct {
		pattern, param, value, want string
		matches                     bool // the route matches the path back, with value as param
	}{
		{"/users/{id}", "id", "42", "/users/42", true},
		{"/users/{id:[0-9]+}", "id", "42", "/users/42", true},
		{"/users/{id:[0-9]{3}}", "id", "042", "/users/042", true}, // a repetition's braces are the regexp's
		{"/users/{id:[a-f]{2,4}}/x/{n:[0-9]{1}}", "n", "5", "/users/{id:[a-f]{2,4}}/x/5", false},
		{"/orgs/{org}/users/{id}", "id", "7", "/orgs/{org}/users/7", true},
		{"/files/{name}.{ext}", "name", "f", "/files/f.{ext}", true},
		{"/static", "id", "1", "/static", false},
		{"/static/*", "id", "1", "/static/*", false},
		{"/users/{id}", "id", "a b/%2F", "/users/a b/%2F", false}, // raw: a decoded path
	}
	for _, tt := range tests {
		tb := mustCompile(t, []Spec{{Name: "r", Pattern: tt.pattern}})
		got := tb.Routes()[0].PathFor(tt.param, tt.value)
		if got != tt.want {
			t.Errorf("%q.PathFor(%q, %q) = %q, want %q", tt.pattern, tt.param, tt.value, got, tt.want)
		}
		if p := tb.Routes()[0].PrefixedPathFor("_uri:", tt.param, tt.value); p != "_uri:"+tt.want {
			t.Errorf("%q.PrefixedPathFor(_uri:, %q, %q) = %q, want _uri:%q", tt.pattern, tt.param, tt.value, p, tt.want)
		}
		if !tt.matches {
			continue
		}
		if _, ps, ok := tb.Match("GET", got); !ok || ps.Get(tt.param) != tt.value {
			t.Errorf("Match(%q) = %v, %v; want %s=%q", got, ps, ok, tt.param, tt.value)
		}
	}
}

// PathFor builds a path in one allocation (a batch builds one per element
// of each bulk answer); before, its builder grew twice for /users/{id}.
func TestPathForOneAllocation(t *testing.T) {
	tb := mustCompile(t, []Spec{{Name: "r", Pattern: "/orgs/{org}/users/{id}"}})
	r := tb.Routes()[0]
	if n := testing.AllocsPerRun(100, func() { _ = r.PathFor("id", "1234567") }); n != 1 {
		t.Errorf("PathFor: %v allocations, want 1", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = r.PrefixedPathFor("_uri:", "id", "1234567") }); n != 1 {
		t.Errorf("PrefixedPathFor: %v allocations, want 1", n)
	}
}
