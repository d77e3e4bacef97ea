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
