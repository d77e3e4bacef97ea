// Package entryblock allocates the cache entry of a fetched answer
// together with the backing array of its tags — the route's tag, its tag
// templates expanded with the request's params, and room for the URI tags
// the proxy adds (surrogate.EntryURITags) — and, for an element of a bulk
// answer, its header's ETag value too: one allocation where there were
// two or three. Each miss stores one entry, and the parts live exactly as
// long as it.
//
// It exists apart from the proxy because the layout (which routes fit a
// block, how much room is left for the URI tags) is a rule about sizes
// that reads and tests alone, with an allocation count to hold it to.
package entryblock

import (
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/route"
)

// uriRoom is the room left for URI tags: one for a path in its folded
// spelling, one more when the request spelled it otherwise.
const uriRoom = 2

// block is an entry and the backing array of its tags (New).
type block struct {
	e    cache.Entry
	tags [4]string
}

// elementBlock is a block and the backing array of its header's ETag
// value (NewElement).
type elementBlock struct {
	block
	etag [1]string
}

// Fits reports whether the tags of an entry of a route with templates
// tag templates fit a block: the route's tag, the templates, uriRoom.
func Fits(templates int) bool { return templates+1+uriRoom <= len(block{}.tags) }

// New is a new entry for an answer on a route whose tag is routeTag and
// whose tag templates are tags, its Tags routeTag and tags expanded with
// params, with room for the URI tags. A route with at most one template
// gets the entry and its tags in one allocation.
func New(routeTag string, tags []route.Template, params route.Params) *cache.Entry {
	var b *block
	if Fits(len(tags)) {
		b = new(block)
	}
	return b.entry(routeTag, tags, params, nil)
}

// NewElement is New for an element of a bulk answer, with slot, room for
// its header's ETag value in the same allocation (nil when the route's
// tags do not fit a block): the element's header lives exactly as long as
// its entry. expanded, when not nil, are tags already expanded with params
// (one per template).
func NewElement(routeTag string, tags []route.Template, params route.Params, expanded []string) (e *cache.Entry, slot []string) {
	if !Fits(len(tags)) {
		var none *block
		return none.entry(routeTag, tags, params, expanded), nil
	}
	b := new(elementBlock)
	return b.block.entry(routeTag, tags, params, expanded), b.etag[:0]
}

// entry fills in the entry of b (nil: a new entry of its own) with its
// tags: routeTag, then tags expanded with params, or expanded when not nil.
func (b *block) entry(routeTag string, tags []route.Template, params route.Params, expanded []string) *cache.Entry {
	var e *cache.Entry
	if b != nil {
		e = &b.e
		e.Tags = b.tags[:0]
	} else {
		e = &cache.Entry{Tags: make([]string, 0, len(tags)+1+uriRoom)}
	}
	e.Tags = append(e.Tags, routeTag)
	if expanded != nil {
		e.Tags = append(e.Tags, expanded...)
		return e
	}
	for _, t := range tags {
		e.Tags = append(e.Tags, t.Expand(params))
	}
	return e
}
