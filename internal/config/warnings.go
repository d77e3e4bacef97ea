package config

import (
	"fmt"
	"strings"
)

// Warnings lists what is valid but likely wrong, one line per problem,
// each starting with its field path. -check prints them and still exits 0.
//
// An unconstrained param that a tag or invalidate template names lets one ID be
// spelled many ways (ABC, abc). Writes are safe either way — a write is
// matched under its canonical and folded spellings too, and every entry
// carries its folded URI tag (internal/spelling) — but a purge by tag
// (POST /purge?tag=item:abc) finds only the spelling it names. Anchoring
// the param ({id:[1-9][0-9]*}) leaves one spelling to cache and purge.
//
// Upgraded connections are never reaped at server.max_connections (a
// tunnel has no idle moment to close): with upstream.max_tunnels at or
// above the cap, tunnels alone can hold every slot, and every new client
// then waits in the accept backlog until one closes.
func (c *Config) Warnings() []string {
	var out []string
	if c.Upstream.MaxTunnels >= c.Server.MaxConnections {
		out = append(out, fmt.Sprintf(
			"upstream.max_tunnels: %d is not below server.max_connections (%d): upgraded connections are never closed to let a client in, so tunnels alone can hold every connection and new clients wait until one ends; keep it below",
			c.Upstream.MaxTunnels, c.Server.MaxConnections))
	}
	for i, r := range c.Routes {
		if len(r.Tags) == 0 && len(r.Invalidate) == 0 {
			continue
		}
		for _, name := range unconstrainedParams(r.Path) {
			if !namedIn("{"+name+"}", r.Tags, r.Invalidate) {
				continue // a tag without the param is one tag whatever the spelling
			}
			out = append(out, fmt.Sprintf(
				"routes[%d].path: param {%s} of %q is unconstrained on a route with tags or invalidate: two spellings of one ID (ABC, abc) name two tags, and a purge by tag finds one; anchor it, e.g. {%s:[1-9][0-9]*}",
				i, name, r.Path, name))
		}
	}
	return out
}

func namedIn(param string, lists ...[]string) bool {
	for _, l := range lists {
		for _, t := range l {
			if strings.Contains(t, param) {
				return true
			}
		}
	}
	return false
}

// unconstrainedParams lists the params of a chi pattern that match any
// segment: {name} without a regexp, and a trailing *.
func unconstrainedParams(pat string) []string {
	params, _ := scanParams(pat) // an unclosed "{" is validate's to report
	var names []string
	for _, p := range params {
		if p.open {
			names = append(names, p.name)
		}
	}
	return names
}
