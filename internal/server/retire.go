package server

import (
	"reflect"
	"slices"
	"strings"

	"github.com/sidecache/sidecache/internal/proxy"
	"github.com/sidecache/sidecache/internal/route"
)

// retired lists the implicit tags (proxy.RouteTag) of the routes of old
// whose stored entries must not be served once cur is in force, so that
// after a reload the config applies to everything the sidecar serves
// (docs/configuration.md, "Reload"). Entries are keyed by method, host,
// path, query and keyed headers, not by route: without this a renamed
// route, or one whose tags changed, would serve entries that carry the
// old name and tags, which its purges and its write routes' invalidate
// templates no longer reach.
//
// An old cacheable route is retired when:
//
//   - cur has no cacheable route of its name (renamed, removed, made
//     uncacheable: its entries would come back, unpurged and uninvalidated
//     meanwhile, when it returns);
//   - its pattern, key or tags changed;
//   - the routes before it that may take its paths (route.MayOverlap)
//     changed: another route now serves what it stored;
//   - cur gains an invalidate rule (a write route's methods, pattern and
//     template that old lacked, or that old had only behind a route,
//     taking some of its writes, that cur removed or changed: see
//     gainedRules) that may reach its entries: a tag template
//     of it may meet the rule's (route.Template.MayMeet), or, with
//     originTags (cache.tag_headers), any entry may carry the tag. Writes
//     answered while the rule was absent did not drop what it covers: a
//     rule restored after a reload dropped it (a half-written file, a
//     mistake undone) would otherwise leave those entries stale until
//     their TTL.
//
// Lenient for invalidation: each test over-approximates, and a retired
// route costs misses, never a stale answer.
func retired(old, cur *route.Table, originTags bool) []string {
	gained := gainedRules(old, cur)
	var out []string
	for _, o := range old.Routes() {
		if !o.Cacheable() {
			continue
		}
		n := cur.Route(o.Name)
		if n == nil || !n.Cacheable() || !sameStorage(o, n) ||
			!slices.Equal(shadows(old, o), shadows(cur, n)) ||
			len(gained) > 0 && (originTags || mayCarry(o, gained)) {
			out = append(out, proxy.RouteTag(o.Name))
		}
	}
	return out
}

// sameStorage reports whether n stores and tags what o did under the same
// keys.
func sameStorage(o, n *route.Route) bool {
	return o.Pattern == n.Pattern && reflect.DeepEqual(o.Key, n.Key) && slices.Equal(sources(o.Tags), sources(n.Tags))
}

// shadows describes the routes before r in t that take GET or HEAD and may
// take a path r's pattern matches.
func shadows(t *route.Table, r *route.Route) []string {
	var out []string
	for _, x := range t.Routes() {
		if x.Name == r.Name {
			break
		}
		if (x.Allows("GET") || x.Allows("HEAD")) && x.MayOverlap(r) {
			out = append(out, x.Name+" "+x.Pattern+" "+strings.Join(x.Methods, ","))
		}
	}
	return out
}

// rule is one invalidate template of a write route, with what decides
// which writes expand it: the route's methods and pattern, and the routes
// before it that may take some of those writes (first match wins).
type rule struct {
	methods, pattern string
	tpl              route.Template
	before           []string // takers(t, r), sorted
}

// gainedRules are cur's invalidate rules that may expand for a write old
// did not expand them for: the rule is new (methods, pattern, template),
// or every old copy of it had a route before it, taking some of its
// writes, that cur lacks or changed. A rule that stays in the file while
// a route inserted before it takes its writes drops nothing meanwhile,
// and is regained when that route goes; a route inserted before a rule
// only narrows its reach and gains nothing.
func gainedRules(old, cur *route.Table) []rule {
	had := map[[3]string][][]string{}
	for _, r := range rulesOf(old) {
		k := [3]string{r.methods, r.pattern, r.tpl.String()}
		had[k] = append(had[k], r.before)
	}
	var out []rule
	for _, r := range rulesOf(cur) {
		narrower := func(b []string) bool { return subset(b, r.before) }
		if !slices.ContainsFunc(had[[3]string{r.methods, r.pattern, r.tpl.String()}], narrower) {
			out = append(out, r)
		}
	}
	return out
}

func rulesOf(t *route.Table) []rule {
	var out []rule
	for _, r := range t.Routes() {
		if len(r.Invalidate) == 0 {
			continue
		}
		ms := slices.Sorted(slices.Values(r.Methods))
		before := takers(t, r)
		for _, tp := range r.Invalidate {
			out = append(out, rule{methods: strings.Join(ms, ","), pattern: r.Pattern, tpl: tp, before: before})
		}
	}
	return out
}

// takers describes, sorted, the routes before r in t that allow one of
// r's methods and may take a path r's pattern matches (route.MayOverlap):
// what such a route matches, r never sees. Only the pattern and methods
// decide what a route takes, so a rename alone changes nothing.
func takers(t *route.Table, r *route.Route) []string {
	var out []string
	for _, x := range t.Routes() {
		if x == r {
			break
		}
		if slices.ContainsFunc(r.Methods, x.Allows) && x.MayOverlap(r) {
			out = append(out, x.Pattern+" "+strings.Join(slices.Sorted(slices.Values(x.Methods)), ","))
		}
	}
	slices.Sort(out)
	return out
}

// subset reports whether every element of a (sorted) is in b (sorted): a
// rule whose old takers all remain takes no write it did not take.
func subset(a, b []string) bool {
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); !ok {
			return false
		}
	}
	return true
}

// mayCarry reports whether an entry r stored may carry a tag one of rules
// drops.
func mayCarry(r *route.Route, rules []rule) bool {
	for _, tp := range r.Tags {
		for _, ru := range rules {
			if tp.MayMeet(ru.tpl) {
				return true
			}
		}
	}
	return false
}

func sources(ts []route.Template) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.String()
	}
	return out
}
