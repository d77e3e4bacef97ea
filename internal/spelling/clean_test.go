package spelling

import "testing"

// A path already folded (every per-ID path a fill stores, /users/42) is
// Fold's answer as it is: no allocation. Before, Fold built it again from
// its segments (2 allocations per cached fill).
func TestFoldCleanPathAllocatesNothing(t *testing.T) {
	for _, p := range []string{"/users/42", "/", "/a/b/c", "/items/caf\xe9", "/a/+/b", "/clients/0"} {
		if got := Fold(p); got != p {
			t.Fatalf("Fold(%q) = %q", p, got)
		}
		if n := testing.AllocsPerRun(100, func() { _ = Fold(p) }); n != 0 {
			t.Errorf("Fold(%q): %v allocations, want 0", p, n)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = Canonical("/Users/42") }); n != 0 {
		t.Errorf("Canonical of a canonical path: %v allocations, want 0", n)
	}
}

// isClean says a path is clean exactly when building it again from its
// segments gives it back: the fast path never changes Fold's or
// Canonical's answer, and misses no clean path.
func FuzzIsClean(f *testing.F) {
	for _, s := range []string{"/items/5", "/items/5/", "/Items/5", "//items/5", "/items/./5", "/items/x/../5",
		"/items/5;v=1", "/clients/01", "/clients/+1", "/clients/-1", "/clients/000", "/", "", "/..", "/.",
		"/items/caf\xe9", "/items/CAF\xc9", "/a/+/b", "/0", "/-0", "/a/0/b", "a/b", "/a//", "/a/b/c", "/;",
		"/a/ 5", "/a/5 ", "/a/\t5", "/a/5-acme", "/a/5.json", "/a/ ", "/a/ ;x", "/a/- 5", "/a/550e8400"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		for _, lower := range []bool{true, false} {
			slow := cleanSegments(p, lower)
			if isClean(p, lower) != (slow == p) {
				t.Fatalf("isClean(%q, %v) = %v, but the segments give %q", p, lower, isClean(p, lower), slow)
			}
		}
	})
}
