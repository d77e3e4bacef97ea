package route

import (
	"slices"
	"strings"
	"testing"
)

func TestTemplate(t *testing.T) {
	p := Params{{"id", "42"}, {"org", "acme"}, {"*", "a/b"}}
	tests := []struct {
		src, want string
		names     []string
	}{
		{"client:{id}", "client:42", []string{"id"}},
		{"all-clients", "all-clients", nil},
		{"{org}/{id}", "acme/42", []string{"org", "id"}},
		{"{id}{id}", "4242", []string{"id", "id"}},
		{"path:{*}", "path:a/b", []string{"*"}},
		{"x:{missing}", "x:", []string{"missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			tpl, err := ParseTemplate(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			if got := tpl.Expand(p); got != tt.want {
				t.Errorf("Expand = %q, want %q", got, tt.want)
			}
			if got := tpl.Params(); !slices.Equal(got, tt.names) {
				t.Errorf("Params = %q, want %q", got, tt.names)
			}
			if tpl.String() != tt.src {
				t.Errorf("String = %q", tpl.String())
			}
		})
	}
}

func TestParseTemplateErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{"", "empty template"},
		{"client:{id", "lacks its closing"},
		{"client:id}", "unmatched '}'"},
		{"client:{}", "empty param name"},
		{"client:{a b}", "only letters"},
		{"client:{a{b}}", "only letters"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			_, err := ParseTemplate(tt.src)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseTemplate(%q) error = %v, want %q", tt.src, err, tt.want)
			}
		})
	}
}

func TestMustParseTemplatePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("MustParseTemplate accepted a bad template")
		}
	}()
	MustParseTemplate("{")
}

// TestCarries: an entry's tags carry a route's templates when they hold
// each expansion, and each expansion of the readings when a value reads
// as another (AppendReadings); extra tags do not matter; nothing is
// allocated.
func TestCarries(t *testing.T) {
	tpl := func(ss ...string) []Template {
		var ts []Template
		for _, s := range ss {
			ts = append(ts, MustParseTemplate(s))
		}
		return ts
	}
	p := Params{{"id", "42"}, {"org", "acme"}}
	slug := Params{{"id", "5-acme"}}
	cases := []struct {
		name string
		tags []string
		ts   []Template
		p    Params
		want bool
	}{
		{"no templates", []string{"_route:r"}, nil, p, true},
		{"exact", []string{"_route:r", "client:42"}, tpl("client:{id}"), p, true},
		{"superset", []string{"_route:r", "x", "client:42", "u:/c/42"}, tpl("client:{id}"), p, true},
		{"old template", []string{"_route:r", "w:42"}, tpl("summary:{id}"), p, false},
		{"another id", []string{"client:4"}, tpl("client:{id}"), p, false},
		{"prefix only", []string{"client:421"}, tpl("client:{id}"), p, false},
		{"two, one missing", []string{"org:acme"}, tpl("org:{org}", "client:{id}"), p, false},
		{"two", []string{"client:42", "acme/42", "org:acme"}, tpl("org:{org}", "{org}/{id}"), p, true},
		{"literal", []string{"all"}, tpl("all"), p, true},
		{"reading present", []string{"client:5-acme", "client:5"}, tpl("client:{id}"), slug, true},
		{"reading missing", []string{"client:5-acme"}, tpl("client:{id}"), slug, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Carries(tc.tags, tc.ts, tc.p); got != tc.want {
				t.Errorf("Carries(%q, %v) = %v, want %v", tc.tags, tc.ts, got, tc.want)
			}
			// What AppendReadings and Expand store is what Carries asks.
			var stored []string
			for _, t := range tc.ts {
				stored = append(stored, t.Expand(tc.p))
			}
			if stored = AppendReadings(stored, tc.ts, tc.p); !Carries(stored, tc.ts, tc.p) {
				t.Errorf("the tags stored for %v, %q, are not carried", tc.p, stored)
			}
		})
	}
	tags, ts := []string{"_route:r", "org:acme", "client:42"}, tpl("client:{id}", "org:{org}")
	if n := testing.AllocsPerRun(100, func() { _ = Carries(tags, ts, p) }); n != 0 {
		t.Errorf("Carries: %v allocations, want 0", n)
	}
}
