package spelling_test

import (
	"slices"
	"testing"

	"github.com/sidecache/sidecache/internal/spelling"
)

// Every spelling issue 11 and issue 24 name folds to the canonical one.
func TestFold(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/items/5", "/items/5"},
		{"/items/5/", "/items/5"},
		{"/Items/5", "/items/5"},
		{"//items/5", "/items/5"},
		{"/items/./5", "/items/5"},
		{"/items/x/../5", "/items/5"},
		{"/items/5;v=1", "/items/5"},
		{"/clients/01", "/clients/1"},
		{"/clients/+1", "/clients/1"},
		{"/clients/-1", "/clients/1"},
		{"/clients/000", "/clients/0"},
		{"/CLIENTS/05/", "/clients/5"},
		{"/", "/"},
		{"", "/"},
		{"/../..", "/"},
		{"/items/caf\xe9", "/items/caf\xe9"},
		{"/items/CAF\xc9", "/items/caf\xc9"},
		{"/a/+/b", "/a/+/b"},
	} {
		if got := spelling.Fold(tc.in); got != tc.want {
			t.Errorf("Fold(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCandidates(t *testing.T) {
	if got, want := spelling.Candidates("/Clients/05/"), []string{"/Clients/05/", "/Clients/5", "/clients/5"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := spelling.Candidates("/clients/5"); !slices.Equal(got, []string{"/clients/5"}) {
		t.Errorf("a canonical path: got %q", got)
	}
}

func TestCanonical(t *testing.T) {
	for v, want := range map[string]bool{"5": true, "0": true, "05": false, "+5": false, "-5": false, "abc": true, "5;v=1": false, ".": false, "": false, "007x": true} {
		if got := spelling.CanonicalParam(v); got != want {
			t.Errorf("CanonicalParam(%q) = %v, want %v", v, got, want)
		}
	}
	for p, want := range map[string]bool{"/a/b": true, "/a/b/": true, "/": true, "//a": false, "/a//b": false, "/a/./b": false, "/a/../b": false, "a": false} {
		if got := spelling.CanonicalPath(p); got != want {
			t.Errorf("CanonicalPath(%q) = %v, want %v", p, got, want)
		}
	}
}

// Fold is idempotent, never longer than its input plus the leading slash,
// and agrees with Canonical up to ASCII case.
func FuzzFold(f *testing.F) {
	for _, s := range []string{"/items/5", "//a/./b/../05;x", "/CAF\xc9/", "", "/+0/-00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		fp := spelling.Fold(p)
		if spelling.Fold(fp) != fp {
			t.Fatalf("Fold not idempotent: %q → %q → %q", p, fp, spelling.Fold(fp))
		}
		if len(fp) > len(p)+1 {
			t.Fatalf("Fold(%q) = %q grew", p, fp)
		}
		if spelling.Fold(spelling.Canonical(p)) != fp {
			t.Fatalf("Fold(Canonical(%q)) != Fold", p)
		}
		if !spelling.CanonicalPath(fp) && fp != "/" {
			t.Fatalf("Fold(%q) = %q is not a canonical path", p, fp)
		}
	})
}
