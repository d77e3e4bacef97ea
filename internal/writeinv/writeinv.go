// Package writeinv decides what a write invalidates, and only that: the
// tags a write request and its upstream's answer call for. Anyone can send
// a write, so what it costs is bounded. Dropping the tags (tombstones,
// Redis, metrics) is the caller's.
//
// When: only once the upstream has had its say, and on every answer after
// which the write may have been applied (surrogate.MayBeApplied): a 2xx, a
// 3xx (a PATCH answered 303 See Other, Post/Redirect/Get, was applied), a
// gateway's 502 or 504, or no answer to a request that provably reached
// the upstream — it was written whole — (a timeout, a connection reset
// after sending: code 0). On each, the write route's invalidate tags and
// the target URI (RFC 9111 §4.4) drop alike; a 2xx or 3xx also drops its
// Location and Content-Location. A 101 drops the route's tags (an upgraded
// connection may carry writes of its own). Dropping the route's tags on a
// 3xx, 502 or 504 as well as a 2xx is over-invalidation, which costs a
// miss; keeping them would serve a version the write replaced. A write the
// upstream refused (4xx, 405, 500, 503) or never received whole (the
// client hung up mid-body, the dial failed) invalidates nothing: the
// caller does not ask.
//
// What: lenient for invalidation (internal/spelling). The write's path,
// its canonical spellings and its folded spellings are each matched
// against the route table, under its method and the others the app may
// apply it as (a POST's _method, a lower-case method, a method override
// field: override.go), so `PATCH /Clients/05/`, `/clients/%205` and
// `/clients/5-acme` drop the `client:5` tags of the write route
// `/clients/{id:[1-9][0-9]*}`, even though their literal spellings match
// no route. An id several stacks read differently names each reading:
// `/clients/0x5` (PostgreSQL 16+ and JavaScript read 5, Ruby and MySQL 0)
// drops `client:5` and `client:0`, `/clients/%EF%BC%95` (a full-width 5,
// Python's int() reads 5) drops `client:5`. Every stored entry carries the URI tag of its
// folded path (surrogate.EntryURITags), so the write's URI tag reaches the
// entry whatever spelling either used. A write to a list endpoint (a split
// route's path, a batch route's bulk path: DELETE /users?ids=1,2) also
// drops what a write to each id's own path would, and the tags of the
// route that stores it (list.go).
//
// How much: at most spelling.MaxFolds spellings of a path (a path past
// it is refused unsent: TooManySpellings), at most three URIs per write
// (target, Location, Content-Location) and one per id a bulk write names,
// each tagged only when a spelling
// of it is one a cacheable route could have stored (anything else has no
// entry to drop, and costs no Redis round trip); no tag longer than Options.MaxKey (no
// stored entry has one: the store refuses them, strict for storage); at
// most a list endpoint's bound of ids (a write naming more is refused
// unsent: TooManyIDs).
package writeinv

import (
	"net/http"
	"slices"

	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/route"
	"github.com/sidecache/sidecache/internal/spelling"
	"github.com/sidecache/sidecache/internal/surrogate"
)

// Options are what a write is judged against.
type Options struct {
	Table *route.Table
	// MaxKey is the longest key or tag, in bytes, an entry may be stored
	// under or carry (max_key_bytes).
	MaxKey int
	// Upstream is the upstream's host: a Location naming it is the
	// sidecar's own origin.
	Upstream string
	// NoURIs: nothing is cached, so no URI has an entry to drop.
	NoURIs bool
}

// Plan is one write's invalidation, waiting for the upstream's answer. It
// keeps no reference to its caller, so that stays on the stack.
type Plan struct {
	o      Options
	r      *http.Request
	route  []string // the write routes' invalidate tags, over every spelling
	routes []string // their names (Routes)
	uri    bool     // an unsafe method: its URIs are invalidated too
	// over: the path reads as more than spelling.MaxFolds spellings
	// (TooManySpellings).
	over bool
	// ids are the URI tags of the per-ID paths a bulk write names
	// (list.go); overIDs: it names more than maxIDs ids (TooManyIDs).
	ids     []string
	overIDs bool
	maxIDs  int
}

// New is r's invalidation; false when r invalidates nothing whatever the
// answer.
func New(o Options, r *http.Request) (Plan, bool) {
	p := Plan{o: o, r: r, uri: !httpcache.SafeMethod(r.Method) && !o.NoURIs}
	var params route.Params
	cands, ok := spelling.Candidates(r.URL.Path)
	if !ok {
		p.over = true
		return p, true
	}
	ms := methods(o.Table, r) // the methods the app may apply r as (override.go)
	params = p.addWriteRoutes(params, cands, ms)
	if p.uri {
		p.addLists(params, cands, ms) // list.go
	}
	slices.Sort(p.route)
	p.route = slices.Compact(p.route)
	return p, len(p.route) > 0 || p.uri
}

// addWriteRoutes adds the invalidate tags of the write routes each of
// cands, a path's spellings, matches under any of ms.
func (p *Plan) addWriteRoutes(params route.Params, cands, ms []string) route.Params {
	for _, path := range cands {
		for _, m := range ms {
			rt, ps, ok := p.o.Table.MatchAppend(params[:0], m, path)
			if !ok || len(rt.Invalidate) == 0 {
				continue
			}
			params = ps
			p.addTags(rt.Invalidate, ps)
			p.addRoute(rt.Name)
		}
	}
	return params
}

// addTags adds ts expanded with ps to the route tags (New de-duplicates
// them once all are in: a bulk write may add thousands).
func (p *Plan) addTags(ts []route.Template, ps route.Params) {
	for _, tp := range ts {
		p.route = append(p.route, tp.Expand(ps))
	}
}

func (p *Plan) addRoute(name string) {
	if !slices.Contains(p.routes, name) {
		p.routes = append(p.routes, name)
	}
}

// Tags are the tags the upstream's answer (its status and header, or code
// 0 when the request was sent whole and no answer came) invalidates, and
// how many more were skipped as longer than MaxKey.
func (p *Plan) Tags(code int, answer http.Header) (tags []string, skipped int) {
	if code == http.StatusSwitchingProtocols || surrogate.MayBeApplied(code) {
		tags = append(tags, p.route...)
	}
	if p.uri {
		tags = append(tags, surrogate.Invalidated(code, p.r.URL, answer, p.stored, p.r.Host, p.o.Upstream)...)
	}
	if surrogate.MayBeApplied(code) {
		tags = append(tags, p.ids...) // a bulk write's per-ID paths, as its target's (list.go)
	}
	// Each once, in linear-logarithmic time: a bulk write may name a
	// thousand ids.
	slices.Sort(tags)
	tags = slices.Compact(tags)
	kept := tags[:0]
	for _, t := range tags {
		if len(t) <= p.o.MaxKey {
			kept = append(kept, t)
		}
	}
	return kept, len(tags) - len(kept)
}

// TooManySpellings reports whether the write's path reads as more
// combinations of integers than spelling.MaxFolds ("/a/0x1/b/0x1/…", six
// ids each 0 or 1): its invalidation cannot be listed within the bound,
// so the caller refuses the write unsent (a clear error, never a write
// that leaves some reading's entries behind).
func (p *Plan) TooManySpellings() bool { return p.over }

// Routes names the write routes whose tags the write invalidates, and
// the per-ID routes of the ids a bulk write names (list.go), for the
// caller's log.
func (p *Plan) Routes() []string { return p.routes }

// stored reports whether an entry could exist for path: within the key
// bound, and a path a cacheable route takes.
func (p *Plan) stored(path string) bool {
	if len(path) > p.o.MaxKey {
		return false
	}
	for _, m := range [...]string{http.MethodGet, http.MethodHead} {
		if rt, _, ok := p.o.Table.MatchAppend(nil, m, path); ok && rt.Cacheable() {
			return true
		}
	}
	return false
}
