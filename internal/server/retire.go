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
//     template that old lacked) that may reach its entries: a tag template
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
// which writes expand it.
type rule struct {
	methods, pattern string
	tpl              route.Template
}

// gainedRules are cur's invalidate rules that old lacked.
func gainedRules(old, cur *route.Table) []rule {
	had := map[[3]string]bool{}
	for _, r := range rulesOf(old) {
		had[[3]string{r.methods, r.pattern, r.tpl.String()}] = true
	}
	var out []rule
	for _, r := range rulesOf(cur) {
		if !had[[3]string{r.methods, r.pattern, r.tpl.String()}] {
			out = append(out, r)
		}
	}
	return out
}

func rulesOf(t *route.Table) []rule {
	var out []rule
	for _, r := range t.Routes() {
		ms := slices.Sorted(slices.Values(r.Methods))
		for _, tp := range r.Invalidate {
			out = append(out, rule{methods: strings.Join(ms, ","), pattern: r.Pattern, tpl: tp})
		}
	}
	return out
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
