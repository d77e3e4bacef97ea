package spelling_test

import (
	"slices"
	"strings"
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
		// Blanks around digits (PostgreSQL's int4 input) and leading
		// digits before anything else (Rails' find, parseInt, MySQL).
		{"/clients/ 5", "/clients/5"},
		{"/clients/5 ", "/clients/5"},
		{"/clients/\t5\r\n", "/clients/5"},
		{"/clients/5-acme", "/clients/5"},
		{"/clients/5-ACME/", "/clients/5"},
		{"/clients/ +05abc", "/clients/5"},
		{"/clients/5.json", "/clients/5"},
		{"/clients/acme-5", "/clients/acme-5"},
		{"/clients/ ", "/clients/ "},
		{"/clients/\u00a05", "/clients/\u00a05"},
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
	for v, want := range map[string]bool{"5": true, "0": true, "05": false, "+5": false, "-5": false, "abc": true, "5;v=1": false, ".": false, "": false, "007x": true,
		" 5": false, "5 ": false, "\t5": false, "5\n": false, " 5-acme": false, "5-acme": true, "acme": true, "acme-5": true, " acme": true} {
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

// Int is the one reading of an id as an integer, for writes, URI tags,
// stored reads and the ids of batch and split lists alike.
func TestInt(t *testing.T) {
	for _, tc := range []struct {
		in, n     string
		whole, ok bool
	}{
		{"5", "5", true, true},
		{"05", "5", true, true},
		{"+5", "5", true, true},
		{"-0", "0", true, true},
		{" 5", "5", false, true},
		{"5\t", "5", false, true},
		{"\v\f5\r", "5", false, true},
		{"5-acme", "5", false, true},
		{"5abc", "5", false, true},
		{"550e8400-e29b-41d4-a716-446655440000", "550", false, true},
		{"acme", "", false, false},
		{"acme-5", "", false, false},
		{"-", "", false, false},
		{" ", "", false, false},
		{"", "", false, false},
		{"+ 5", "", false, false},
		{"\u00a05", "", false, false},
	} {
		n, whole, ok := spelling.Int(tc.in)
		if n != tc.n || whole != tc.whole || ok != tc.ok {
			t.Errorf("Int(%q) = %q, %v, %v; want %q, %v, %v", tc.in, n, whole, ok, tc.n, tc.whole, tc.ok)
		}
	}
	for v, want := range map[string]string{"5": "", "acme": "", "05": "5", " 5": "5", "5-acme": "5"} {
		if got, ok := spelling.Reading(v); got != want || ok != (want != "") {
			t.Errorf("Reading(%q) = %q, %v; want %q", v, got, ok, want)
		}
	}
}

// Int's n is a canonical decimal that reads as itself; whole is exactly a
// signed run of digits; a value Int reads is folded to n in a path; a
// canonical param that reads as another is a slug, never blank-padded.
func FuzzInt(f *testing.F) {
	for _, s := range []string{"5", "05", "+5", " 5", "5 ", "\t5", "5-acme", "acme", "", "-", "0x1F", "550e8400-e29b", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, whole, ok := spelling.Int(s)
		if !ok {
			if n != "" || whole {
				t.Fatalf("Int(%q) = %q, %v, false", s, n, whole)
			}
			return
		}
		if m, w, o := spelling.Int(n); m != n || !w || !o || n != "0" && n[0] == '0' {
			t.Fatalf("Int(%q) = %q, which reads as %q, %v, %v", s, n, m, w, o)
		}
		d := strings.TrimLeft(s, "+-")
		if plain := len(s)-len(d) <= 1 && d != "" && strings.Trim(d, "0123456789") == ""; whole != plain {
			t.Fatalf("Int(%q): whole = %v", s, whole)
		}
		if !strings.ContainsAny(s, "/;") && s != "." && s != ".." {
			if got := spelling.Fold("/a/" + s); got != "/a/"+n {
				t.Fatalf("Fold(/a/%s) = %q, want /a/%s", s, got, n)
			}
		}
		const blanks = " \t\n\v\f\r"
		padded := strings.IndexByte(blanks, s[0]) >= 0 || strings.IndexByte(blanks, s[len(s)-1]) >= 0
		if spelling.CanonicalParam(s) && n != s && (whole || padded) {
			t.Fatalf("CanonicalParam(%q) is true", s)
		}
	})
}

// Fold is idempotent, never longer than its input plus the leading slash,
// and agrees with Canonical up to ASCII case.
func FuzzFold(f *testing.F) {
	for _, s := range []string{"/items/5", "//a/./b/../05;x", "/CAF\xc9/", "", "/+0/-00", "/a/ 5/5-b/\t07x;y", "/5 /-"} {
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
