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
		// A segment several parsers read differently folds to its
		// first reading here (AppendFolds gives every one); Unicode
		// blanks and digits read as Python and JavaScript read them.
		{"/clients/\u00a05", "/clients/5"},
		{"/clients/0x5", "/clients/0"},
		{"/clients/%EF%BC%95", "/clients/%ef%bc%95"},
		{"/clients/\uff15", "/clients/5"},
		{"/clients/\ufeff5", "/clients/5"},
	} {
		if got := spelling.Fold(tc.in); got != tc.want {
			t.Errorf("Fold(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCandidates(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"/Clients/05/", []string{"/Clients/05/", "/Clients/5", "/clients/5"}},
		{"/clients/5", []string{"/clients/5"}},
		// Every reading of every segment, in every combination.
		{"/Clients/0x5", []string{"/Clients/0x5", "/Clients/0", "/Clients/5", "/clients/0", "/clients/5"}},
		{"/a/1_0/b/0b1", []string{"/a/1_0/b/0b1", "/a/1/b/0", "/a/10/b/0", "/a/1/b/1", "/a/10/b/1"}},
	} {
		got, ok := spelling.Candidates(tc.in)
		if !ok || !slices.Equal(got, tc.want) {
			t.Errorf("Candidates(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
	// Seven ids each read two ways: 128 combinations, past MaxFolds.
	over := strings.Repeat("/a/0x1", 7)
	if got, ok := spelling.Candidates(over); ok || !slices.Equal(got, []string{over}) {
		t.Errorf("Candidates(%q) = %q, %v; want the path alone, false", over, got, ok)
	}
	if got, ok := spelling.AppendFolds(nil, strings.Repeat("/a/0x1", 6)); !ok || len(got) != 64 {
		t.Errorf("six ids read two ways: %d folds, %v; want 64", len(got), ok)
	}
}

func TestCanonical(t *testing.T) {
	for v, want := range map[string]bool{"5": true, "0": true, "05": false, "+5": false, "-5": false, "abc": true, "5;v=1": false, ".": false, "": false, "007x": true,
		" 5": false, "5 ": false, "\t5": false, "5\n": false, " 5-acme": false, "5-acme": true, "acme": true, "acme-5": true, " acme": true,
		// Several readings, or one only by digits or blanks ASCII does
		// not have: not stored.
		"0x5": false, "0o5": false, "0b101": false, "0d5": false, "1_000": false, "0x5-acme": false, "1_0-acme": false,
		"\uff15": false, "1\uff15": false, "\u00a05": false, "5\u00a0": false, "\ufeff5": false, "\u30005": false, "\u00855": false, "\x1c5": true,
		"0x0": true, "5_acme": true, "5.json": true, "\u00a0acme": true,
		// A number with a fraction or an exponent, whether it reads as
		// several integers or as one.
		"0.5e1": false, "50e-1": false, "5e2": false, "5.0": false, "5e0": false, "5.": false, ".5e1": false, "5.9": false, "1e400": false,
		// One in front of a slug: 500 to MySQL and PHP, 5 to Rails.
		"5e2-acme": false, "5.0-acme": true, "5.0.1": true, "5e": true} {
		if got := spelling.CanonicalParam(v); got != want {
			t.Errorf("CanonicalParam(%q) = %v, want %v", v, got, want)
		}
	}
	for p, want := range map[string]bool{"/a/b": true, "/a/b/": true, "/": true, "//a": false, "/a//b": false, "/a/./b": false, "/a/../b": false, "a": false,
		"/a/0x5": false, "/a/1_000/b": false, "/a/5-acme": true, "/a/05": true} {
		if got := spelling.CanonicalPath(p); got != want {
			t.Errorf("CanonicalPath(%q) = %v, want %v", p, got, want)
		}
	}
}

// AppendInts is the one rule of which integers an id names, for writes,
// URI tags, stored reads and the ids of batch and split lists alike: each
// reading some common parser gives (parsers_test.go), in its order.
func TestInts(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"5", []string{"5"}},
		{"05", []string{"5"}},
		{"+5", []string{"5"}},
		{"-0", []string{"0"}},
		{" 5", []string{"5"}},
		{"5\t", []string{"5"}},
		{"\v\f5\r", []string{"5"}},
		{"5-acme", []string{"5"}},
		{"5abc", []string{"5"}},
		{"550e8400-e29b-41d4-a716-446655440000", []string{"550"}},
		{"acme", nil},
		{"acme-5", nil},
		{"-", nil},
		{" ", nil},
		{"", nil},
		{"+ 5", nil},
		// PostgreSQL 16+ and JavaScript read the prefixes; Ruby, Rails
		// and MySQL read the 0 in front of them.
		{"0x5", []string{"0", "5"}},
		{"0X1f", []string{"0", "31"}},
		{"-0x5", []string{"0", "5"}},
		{"0o5", []string{"0", "5"}},
		{"0b101", []string{"0", "5"}},
		{"0x", []string{"0"}},
		{"0x5g", []string{"0", "5"}},
		{"0x1_F", []string{"0", "1", "31"}},
		{"0x20000000000001", []string{"0", "9007199254740993"}}, // past 2^53: PostgreSQL's only
		// Ruby's to_i (Rails' find) reads "0d" and underscores.
		{"0d5", []string{"0", "5"}},
		{"1_000", []string{"1", "1000"}},
		{"1__0", []string{"1"}},
		{"1_0-acme", []string{"1", "10"}},
		// Python's int() reads Unicode digits and blanks; parseInt and
		// Number skip U+FEFF and the Unicode spaces in front.
		{"\uff15", []string{"5"}},
		{"1\uff15", []string{"1", "15"}},
		{"\u0665\u0660", []string{"50"}},
		{"\u00a05", []string{"5"}},
		{"5\u00a0", []string{"5"}},
		{"\ufeff5", []string{"5"}},
		{"\u30005\u3000", []string{"5"}},
		{"\u00a00x5", []string{"5"}},
		{"\x1c5", nil},
		{"\u00851_0", []string{"10"}},
		{"\u00a05-acme", []string{"5"}},
		{"\ufeff\uff15", nil},
		// A number with a fraction or an exponent is its value to
		// JavaScript's Number and MySQL's comparison, truncated to PHP's
		// (int), and its leading digits to the others.
		{"0.5e1", []string{"0", "5"}},
		{"50e-1", []string{"50", "5"}},
		{"5e2", []string{"5", "500"}},
		{"0.8e1", []string{"0", "8"}},
		{"80e-1", []string{"80", "8"}},
		{"5E+2", []string{"5", "500"}},
		{".5e1", []string{"5"}},
		{"5.", []string{"5"}},
		{"5.0", []string{"5"}},
		{"5.9", []string{"5"}},
		{"-5.9e1", []string{"5", "59"}},
		{" 5e2\n", []string{"5", "500"}},
		{"\u00a05e2", []string{"5", "500"}},
		{"4.99999999999999999", []string{"4", "5"}}, // the nearest double is 5
		{"1e-400", []string{"1", "0"}},
		{"1e400", []string{"1"}},
		{"9.2e18", []string{"9", "9200000000000000000"}},
		{"9.3e18", []string{"9"}}, // past int64
		{"5e", []string{"5"}},
		{"5.json", []string{"5"}},
		{"550e8400-e29b", []string{"550"}},
		// MySQL's comparison and PHP's (int) read the number in front
		// of a longer string, fraction and exponent too; Ruby's to_i and
		// parseInt its leading digits.
		{"5e2-acme", []string{"5", "500"}},
		{"5.0-x", []string{"5"}},
		{"0x5-x", []string{"0", "5"}},
		{"0.5e1-x", []string{"0", "5"}},
		{"50e-1-x", []string{"50", "5"}},
		{"5e-1-x", []string{"5", "0"}},
		{".5e1-x", []string{"5"}},
		{" 5e2_0", []string{"5", "500"}},
		{"3e5a7c", []string{"3", "300000"}},
		{"5.e2x", []string{"5", "500"}},
		{"1_0.5", []string{"1", "10"}},
		{".", nil},
		{".e1", nil},
	} {
		if got := spelling.AppendInts(nil, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("AppendInts(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for v, want := range map[string]string{"5": "", "acme": "", "05": "5", " 5": "5", "5-acme": "5", "0x5": "", "\uff15": "5", "5e2": "", "5.0": "5", "5e2-acme": "", "5.0-x": "5"} {
		if got, ok := spelling.Reading(v); got != want || ok != (want != "") {
			t.Errorf("Reading(%q) = %q, %v; want %q", v, got, ok, want)
		}
	}
}

// AppendInts gives exactly the readings of the parsers it follows
// (parsers_test.go): none that no parser gives (it would over-invalidate,
// and refuse to store a slug for nothing), and every one some parser
// gives (a write under-invalidating serves a lie). Each is a canonical
// decimal that reads as itself; a spelling with several is never a
// canonical param, and its path folds to each.
func FuzzInts(f *testing.F) {
	for _, s := range []string{"5", "05", "+5", " 5", "5 ", "\t5", "5-acme", "acme", "", "-", "0x1F", "550e8400-e29b", "99999999999999999999",
		"0x5", "0o7", "0b101", "0d5", "1_000", "0x_1", "\uff15", "\u00a05", "\ufeff0x5", "\u3000-1_2\u3000", "0x8000000000000000", "-0x8000000000000000", "\x1c5", "\u00851_0",
		"0.5e1", "50e-1", "5e2", ".5e1", "5.", "5e2-acme", "0.5e1-x", "3e5a7c", "5.e2x", " -5e-1_x", "-9.3e18", "9.223372036854775807e18", "-9.223372036854775808e18", "4.99999999999999999", "1e-400", "1e400", "1e99999999999", "0.000e99999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := spelling.AppendInts(nil, s)
		want := parsersRead(s)
		for _, n := range got {
			if !want[n] {
				t.Fatalf("AppendInts(%q) = %q: no parser reads %s (they read %v)", s, got, n, want)
			}
			if m := spelling.AppendInts(nil, n); !slices.Equal(m, []string{n}) || n != "0" && n[0] == '0' {
				t.Fatalf("AppendInts(%q) = %q, and %q reads as %q", s, got, n, m)
			}
		}
		for n := range want {
			if !slices.Contains(got, n) {
				t.Fatalf("AppendInts(%q) = %q lacks %s, which a parser reads (%v)", s, got, n, want)
			}
		}
		if len(got) > spelling.MaxReadings {
			t.Fatalf("AppendInts(%q) = %q: more than MaxReadings", s, got)
		}
		if len(got) > 1 && spelling.CanonicalParam(s) {
			t.Fatalf("CanonicalParam(%q) is true, with readings %q", s, got)
		}
		if len(got) == 1 && got[0] != s && spelling.CanonicalParam(s) {
			// A slug: ASCII digits in front, then a name, and not a
			// number with a fraction or an exponent.
			d := strings.TrimLeft(s, "+-")
			if decimalRe.MatchString(strings.TrimFunc(s, isJSBlank)) || len(s)-len(d) > 1 || d == "" || d[0] < '0' || d[0] > '9' || strings.Trim(d, "0123456789") == "" || strings.TrimSpace(s) != s {
				t.Fatalf("CanonicalParam(%q) is true, reading %s", s, got[0])
			}
		}
		if !strings.ContainsAny(s, "/;") && s != "." && s != ".." && s != "" {
			folds, ok := spelling.AppendFolds(nil, "/a/"+s)
			for _, n := range got {
				if !ok || !slices.Contains(folds, "/a/"+n) {
					t.Fatalf("AppendFolds(/a/%s) = %q, %v, lacks /a/%s", s, folds, ok, n)
				}
			}
			if len(got) > 0 && len(folds) != len(got) {
				t.Fatalf("AppendFolds(/a/%s) = %q, for readings %q", s, folds, got)
			}
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
