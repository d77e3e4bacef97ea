package server

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sidecache/sidecache/internal/config"
	"github.com/sidecache/sidecache/internal/route"
)

const retireBase = `
upstream: {url: "http://127.0.0.1:3000"}
routes:
  - {name: w, path: "/w/{id}", ttl: 5m, tags: ["w:{id}"]}
  - {name: wsum, path: "/wsum/{id}", ttl: 5m, tags: ["w:{id}"]}
  - {name: u, path: "/u/{id}", ttl: 5m, tags: ["user:{id}"]}
  - {name: w-write, methods: [PATCH], path: "/w/{id}", invalidate: ["w:{id}"]}
`

func retireTable(t *testing.T, yaml string) *route.Table {
	t.Helper()
	c, err := config.Parse([]byte(yaml), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tb, err := compileRoutes(c.Routes)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// TestRetired: which routes a reload retires (retire.go), and that a
// change that keeps what a route stores and how it is reached retires
// nothing.
func TestRetired(t *testing.T) {
	base := retireTable(t, retireBase)
	edit := func(old, new string) string {
		if !strings.Contains(retireBase, old) {
			t.Fatalf("retireBase lacks %q", old)
		}
		return strings.Replace(retireBase, old, new, 1)
	}
	for _, c := range []struct {
		what, yaml string
		origin     bool
		want       []string
	}{
		{"unchanged", retireBase, false, nil},
		{"ttl", edit("wsum/{id}\", ttl: 5m", "wsum/{id}\", ttl: 7m"), false, nil},
		{"route added last", retireBase + "  - {name: z, path: \"/z/{id}\", ttl: 1m}\n", false, nil},
		{"renamed", edit("name: wsum,", "name: wsummary,"), false, []string{"_route:wsum"}},
		{"removed", edit("  - {name: u, path: \"/u/{id}\", ttl: 5m, tags: [\"user:{id}\"]}\n", ""), false, []string{"_route:u"}},
		{"uncacheable", edit("{name: u, path: \"/u/{id}\", ttl: 5m, tags: [\"user:{id}\"]}", "{name: u, methods: [DELETE], path: \"/u/{id}\"}"), false, []string{"_route:u"}},
		{"key", edit("\"/u/{id}\", ttl: 5m,", "\"/u/{id}\", ttl: 5m, key: {query: [a]},"), false, []string{"_route:u"}},
		{"tags", edit("tags: [\"user:{id}\"]", "tags: [\"person:{id}\"]"), false, []string{"_route:u"}},
		{"pattern", edit("\"/u/{id}\"", "\"/u/{id:[0-9]+}\""), false, []string{"_route:u"}},
		{"shadowed", strings.Replace(retireBase, "routes:\n", "routes:\n  - {name: all, path: \"/{kind}/{id}\", ttl: 1m}\n", 1), false, []string{"_route:w", "_route:wsum", "_route:u"}},
		{"unrelated before", strings.Replace(retireBase, "routes:\n", "routes:\n  - {name: a, path: \"/a/{id}\", ttl: 1m}\n", 1), false, nil},
		{"invalidate gained", edit("invalidate: [\"w:{id}\"]", "invalidate: [\"w:{id}\", \"user:{id}\"]"), false, []string{"_route:u"}},
		{"invalidate lost", edit("invalidate: [\"w:{id}\"]", "invalidate: [\"user:{id}\"]"), false, []string{"_route:u"}},
		{"write methods", edit("methods: [PATCH]", "methods: [PATCH, PUT]"), false, []string{"_route:w", "_route:wsum"}},
		{"gained with tag_headers", edit("methods: [PATCH]", "methods: [PATCH, PUT]"), true, []string{"_route:w", "_route:wsum", "_route:u"}},
	} {
		got := retired(base, retireTable(t, c.yaml), c.origin)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: retired %q, want %q", c.what, got, c.want)
		}
	}
	// A torn file (the write route's invalidate lost) retires nothing by
	// itself; the whole file back retires what the rule it regains covers.
	torn := retireTable(t, edit(", invalidate: [\"w:{id}\"]", ""))
	if got := retired(base, torn, false); got != nil {
		t.Errorf("torn: retired %q, want none", got)
	}
	if got, want := retired(torn, base, false), []string{"_route:w", "_route:wsum"}; !slices.Equal(got, want) {
		t.Errorf("restored: retired %q, want %q", got, want)
	}
}

// TestServedRoutes: a purge of everything covers every route name served
// since start, current ones always, the oldest retired ones forgotten past
// the bound.
func TestServedRoutes(t *testing.T) {
	var s servedRoutes
	s.add(retireTable(t, retireBase))
	s.add(retireTable(t, strings.Replace(retireBase, "name: wsum,", "name: wsummary,", 1)))
	if got, want := s.tags(), []string{"_route:wsum", "_route:w", "_route:wsummary", "_route:u", "_route:w-write"}; !slices.Equal(got, want) {
		t.Errorf("tags = %q, want %q", got, want)
	}
	for i := range maxServedRoutes {
		s.add(retireTable(t, fmt.Sprintf("upstream: {url: \"http://127.0.0.1:3000\"}\nroutes:\n  - {name: r%d, path: /r, ttl: 1m}\n", i)))
	}
	s.add(retireTable(t, retireBase))
	got := s.tags()
	if len(got) != maxServedRoutes || !slices.Equal(got[len(got)-4:], []string{"_route:w", "_route:wsum", "_route:u", "_route:w-write"}) || slices.Contains(got, "_route:r0") {
		t.Errorf("past the bound: %d tags, last %q, r0 kept: %v", len(got), got[len(got)-4:], slices.Contains(got, "_route:r0"))
	}
}

// TestRetiredRuleReach: an invalidate rule that stays in the file is
// gained when a route before it that took some of its writes goes or
// changes (the rule reaches writes it did not), not when one is inserted
// (it reaches fewer).
func TestRetiredRuleReach(t *testing.T) {
	before := func(route string) string {
		return strings.Replace(retireBase, "  - {name: w-write,", "  - "+route+"\n  - {name: w-write,", 1)
	}
	shadow := before(`{name: shadow, methods: [PATCH], path: "/w/{id:[1-9][0-9]*}", ttl: 5m}`)
	for _, c := range []struct {
		what, old, cur string
		origin         bool
		want           []string
	}{
		{"shadow inserted", retireBase, shadow, false, nil},
		{"shadow removed", shadow, retireBase, false, []string{"_route:w", "_route:wsum"}},
		{"shadow removed, tag_headers", shadow, retireBase, true, []string{"_route:w", "_route:wsum", "_route:u"}},
		{"shadow narrowed", shadow, strings.Replace(shadow, "[1-9][0-9]*", "[1-9]", 1), false, []string{"_route:w", "_route:wsum"}},
		{"shadow loses the method", shadow, strings.Replace(shadow, "methods: [PATCH], path", "methods: [PUT], path", 1), false, []string{"_route:w", "_route:wsum"}},
		{"shadow renamed", shadow, strings.Replace(shadow, "name: shadow,", "name: shade,", 1), false, nil},
		{"second shadow inserted", shadow, strings.Replace(shadow, "  - {name: w-write,", "  - {name: s2, methods: [PATCH], path: \"/w/{x}\"}\n  - {name: w-write,", 1), false, nil},
		{"other method before", before(`{name: d, methods: [DELETE], path: "/w/{id}"}`), retireBase, false, nil},
		{"other path before", before(`{name: x, methods: [PATCH], path: "/x/{id}"}`), retireBase, false, nil},
	} {
		got := retired(retireTable(t, c.old), retireTable(t, c.cur), c.origin)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: retired %q, want %q", c.what, got, c.want)
		}
	}
}
