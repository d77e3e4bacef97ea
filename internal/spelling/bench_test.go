package spelling_test

import (
	"testing"

	"github.com/sidecache/sidecache/internal/spelling"
)

// The checks every cached read makes of its path and params, and the fold
// every fill makes of its path: for the canonical ASCII id, a slug and a
// word, none allocates (go test -run - -bench Spelling ./internal/spelling).
func BenchmarkSpelling(b *testing.B) {
	for _, tc := range []struct{ name, path, param string }{
		{"id", "/users/42", "42"},
		{"slug", "/users/42-acme", "42-acme"},
		{"word", "/users/acme", "acme"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = spelling.CanonicalPath(tc.path)
				_ = spelling.CanonicalParam(tc.param)
				_, _ = spelling.Reading(tc.param)
				_ = spelling.Fold(tc.path)
			}
		})
	}
}
