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

// upstream.max_tunnels at or above server.max_connections is warned about,
// naming both fields; below it is not (the defaults: 1024 and 4096).
func TestWarningsTunnelsNotBelowConnections(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		warn bool
	}{
		{"", false},
		{"server: {max_connections: 1024}\n", true},
		{"server: {max_connections: 100}\nupstream: {url: http://up:3000, max_tunnels: 99}\n", false},
		{"server: {max_connections: 100}\nupstream: {url: http://up:3000, max_tunnels: 200}\n", true},
	} {
		y := tc.yaml
		if !strings.Contains(y, "upstream:") {
			y = minimal + y
		}
		c, err := Parse([]byte(y), "w.yaml")
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		var got []string
		for _, w := range c.Warnings() {
			if strings.HasPrefix(w, "upstream.max_tunnels:") {
				got = append(got, w)
			}
		}
		if tc.warn != (len(got) == 1) || len(got) > 1 {
			t.Errorf("%q: max_tunnels warnings %q, want one: %v", tc.yaml, got, tc.warn)
		}
		for _, w := range got {
			if !strings.Contains(w, "server.max_connections") {
				t.Errorf("warning does not name server.max_connections: %s", w)
			}
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
