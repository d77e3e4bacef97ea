package route

import "testing"

// TestTemplateMayMeet: false only where the literal text rules a common
// expansion out.
func TestTemplateMayMeet(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"w:{id}", "w:{id}", true},
		{"w:{id}", "w:{n}", true},
		{"w:{id}", "wsum:{id}", false},
		{"w:{id}", "w{id}", true}, // "w:5" is w{id} with id ":5"
		{"w:{id}", "user:{id}", false},
		{"client:{id}:name", "client:{id}:addr", false},
		{"client:{id}:name", "{x}:name", true},
		{"all-users", "all-users", true},
		{"all-users", "all-clients", false},
		{"all-users", "all-{kind}", true},
		{"all-users", "user:{id}", false},
		{"a:{x}", "a:", true},     // x may be empty
		{"a:{x}:b", "a:b", false}, // shorter than the template's own text
		{"{x}", "anything", true},
	} {
		a, b := MustParseTemplate(c.a), MustParseTemplate(c.b)
		if got := a.MayMeet(b); got != c.want {
			t.Errorf("%q.MayMeet(%q) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := b.MayMeet(a); got != c.want {
			t.Errorf("%q.MayMeet(%q) = %v, want %v (not symmetric)", c.b, c.a, got, c.want)
		}
	}
}

// TestRouteMayOverlap: false only where the static text (or a literal
// path the other pattern refuses) rules a common path out.
func TestRouteMayOverlap(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"/w/{id}", "/w/{n:[0-9]+}", true},
		{"/w/{id}", "/wsum/{id}", false},
		{"/w/{id}", "/w/{id}/summary", true}, // {id} stops at "/" but the text allows it
		{"/w/{id}/summary", "/w/{id}/detail", false},
		{"/users", "/users/{id}", false},
		{"/users", "/users", true},
		{"/users/7", "/users/{id:[0-9]+}", true},
		{"/users/x", "/users/{id:[0-9]+}", false},
		{"/static/*", "/static/a/{b}", true},
		{"/static/*", "/other/{b}", false},
		{"/{kind}/{id}", "/w/{id}", true},
	} {
		tb, err := Compile([]Spec{{Name: "a", Pattern: c.a, TTL: 1}, {Name: "b", Pattern: c.b, TTL: 1}})
		if err != nil {
			t.Fatal(err)
		}
		a, b := tb.Route("a"), tb.Route("b")
		if got := a.MayOverlap(b); got != c.want {
			t.Errorf("%q.MayOverlap(%q) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := b.MayOverlap(a); got != c.want {
			t.Errorf("%q.MayOverlap(%q) = %v, want %v (not symmetric)", c.b, c.a, got, c.want)
		}
	}
}
