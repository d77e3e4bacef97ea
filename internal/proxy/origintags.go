package proxy

import (
	"net/http"
	"slices"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/route"
	"github.com/sidecache/sidecache/internal/surrogate"
)

// TagHeaders names the upstream response headers whose values are surrogate
// keys (Fastly's Surrogate-Key, Varnish's xkey); see internal/surrogate.
type TagHeaders = surrogate.Config

// tagEntry completes the tags of e, an answer fetched for x: the implicit
// URI tags of x's path (internal/writeinv) and the keys the upstream named in
// its tag headers, which it then strips from e's header (when configured).
// It reports false when the upstream's keys are over the bounds: e may
// answer its request but must not be stored.
//
// An element of a bulk answer carries every key of the whole answer: the
// sidecar cannot tell which key names which element, and over-invalidating
// costs a miss where under-invalidating would serve a purged answer.
func (x *exchange) tagEntry(e *cache.Entry, upstream http.Header) bool {
	var ok bool
	var tags []string
	if x.uriTag != "" {
		tags = surrogate.EntryURITagsOf(e.Tags, x.uriTag) // an element's (setID)
	} else {
		tags = surrogate.EntryURITags(e.Tags, x.r.URL.Path)
	}
	// An id the origin reads as another ("5-acme" as 5): its reading's tags.
	tags = route.AppendReadings(tags, x.rs.rt.Tags, x.params.list())
	e.Tags, ok = x.h.tagh.AppendKeys(tags, upstream)
	x.h.tagh.StripFrom(e.Header)
	if !ok {
		x.h.log.Debug("upstream tags over bounds: not stored", "route", x.rs.rt.Name, "path", x.r.URL.Path)
		return false
	}
	// Strict for storage: a write skips a tag longer than max_key_bytes
	// (internal/writeinv), so no entry may carry one.
	for _, t := range e.Tags {
		if len(t) > x.h.maxKey {
			x.h.log.Debug("tag over max_key_bytes: not stored", "route", x.rs.rt.Name, "bytes", len(t))
			return false
		}
	}
	return true
}

// carried reports whether e carries every tag x's route gives what it
// stores for x's request now (entryblock.New, tagEntry's readings): its
// route tag and its templates' expansions. Keys do not name the route,
// and an entry's tags are fixed when it is stored: an entry another
// replica stored in L2 under a config whose route had another name or
// other templates (a restart or a rolling deploy; a reload drops its own,
// internal/server retire.go) lacks the tags this config's write routes
// and purges by route drop, so it would be served until its TTL whatever
// they dropped. It is a miss instead: fetched and stored over, with this
// config's tags. Asked of every tier, since an L2 hit is copied into L1
// before the proxy sees it (cache.Tiered.promote). Extra tags (another
// config's, URI tags, the upstream's keys) only over-invalidate.
func (x *exchange) carried(e *cache.Entry) bool {
	return slices.Contains(e.Tags, x.rs.routeTag) && route.Carries(e.Tags, x.rs.rt.Tags, x.params.list())
}
