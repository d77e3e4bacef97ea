package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestHelpNamesDocs: -help is where an operator looks first, so it names
// the reference pages, each a file that exists in the repository, and
// exits 0 like any tool asked for its usage.
func TestHelpNamesDocs(t *testing.T) {
	var stdout, stderr strings.Builder
	if code := run([]string{"-help"}, &stdout, &stderr); code != 0 {
		t.Errorf("-help exited %d, want 0", code)
	}
	out := stderr.String()
	pages := regexp.MustCompile(`(?m)^\s+((?:docs/)?[\w./-]+\.md)\s`).FindAllStringSubmatch(out, -1)
	want := map[string]bool{"README.md": false, "docs/configuration.md": false, "docs/admin-api.md": false, "docs/metrics.md": false}
	for _, m := range pages {
		if _, err := os.Stat(filepath.Join("..", "..", filepath.FromSlash(m[1]))); err != nil {
			t.Errorf("-help names %s, which is not in the repository: %v", m[1], err)
		}
		want[m[1]] = true
	}
	for page, named := range want {
		if !named {
			t.Errorf("-help does not name %s; it printed:\n%s", page, out)
		}
	}
	for _, flag := range []string{"-config", "-check", "-version"} {
		if !strings.Contains(out, flag) {
			t.Errorf("-help does not list %s", flag)
		}
	}
}
