package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A path param that matches any segment and that a tag or invalidate
// template names is warned about, with its field path; an anchored param,
// a route that neither tags nor invalidates, and a template that does not
// name the param are not.
func TestWarningsNameUnconstrainedParamsOnTaggingRoutes(t *testing.T) {
	c, err := Parse([]byte(minimal+`
routes:
  - name: client
    path: /clients/{id}
    ttl: 1m
    tags: ["client:{id}"]
  - name: client-write
    methods: [PATCH]
    path: /orgs/{org:[a-z]+}/clients/{id}
    invalidate: ["client:{id}"]
  - name: anchored
    path: /users/{id:[1-9][0-9]*}
    ttl: 1m
    tags: ["user:{id}"]
  - name: untagged
    path: /files/{name}
    ttl: 1m
  - name: client-write-any-spelling
    methods: [PATCH]
    path: /clients/{id}
    invalidate: ["_route:client"]
`), "w.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := c.Warnings()
	var paths []string
	for _, w := range got {
		p, _, _ := strings.Cut(w, ":")
		paths = append(paths, p)
	}
	if !slices.Equal(paths, []string{"routes[0].path", "routes[1].path"}) {
		t.Fatalf("warnings:\n%s\nwant one for routes[0].path and one for routes[1].path", strings.Join(got, "\n"))
	}
	for _, w := range got {
		if !strings.Contains(w, "{id}") || !strings.Contains(w, "{id:[1-9][0-9]*}") {
			t.Errorf("warning does not name the param and the fix: %s", w)
		}
	}
}

// Every config the project ships anchors its IDs, so none warns.
func TestShippedConfigsHaveNoWarnings(t *testing.T) {
	files, _ := filepath.Glob("../../config/*.yaml")
	more, _ := filepath.Glob("../../deploy/kubernetes/*.yaml")
	files = append(files, more...)
	more, _ = filepath.Glob("../../deploy/kubernetes/example/overlays/*/sidecache.yaml")
	files = append(files, more...)
	checked := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "upstream:") {
			continue // a manifest, not a sidecache config
		}
		t.Setenv("SIDECACHE_ADMIN_TOKEN", "tok")
		c, err := Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		checked++
		for _, w := range c.Warnings() {
			t.Errorf("%s: %s", f, w)
		}
	}
	if checked < 4 {
		t.Fatalf("checked %d configs, want the 2 in config/ and at least 2 in deploy/", checked)
	}
}
