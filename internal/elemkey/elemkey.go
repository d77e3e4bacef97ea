// Package elemkey lays out the strings the cache entry of one element of
// a bulk answer keeps — its URI tag, its key and its expanded tag
// templates — in the room the split left past the element's bytes
// (bulk.SplitForRoom), or, for an id that outgrows it, in one allocation
// of their own. They live exactly as long as the element's body, and one
// object is one allocation and one mark for the collector in a cache of
// many, where they were one each (issue 23).
//
// The strings are those a per-ID fetch of the id would have: the route's
// path with the id in it, the key its request builds (cachekey.Frame:
// the elements' requests differ in their path alone), and the route's
// tag templates expanded with the id.
package elemkey

import (
	"net/url"
	"unsafe"

	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/route"
	"github.com/sidecache/sidecache/internal/surrogate"
)

// MaxTags is the most tag templates Layout expands for an element; those
// of a route with more are expanded by entryblock.NewElement.
const MaxTags = 4

// Layout lays out the strings of the element of id on batch route rt:
// uri is surrogate.URITagPrefix followed by the element's path, k its key
// (key is the frame of the elements' keys), and tags the route's tag
// templates expanded with ps (the route's params, its id param set to
// id; only read), in tags' array, or nil for a route with more than
// MaxTags of them. They are laid out in room when it holds them (the
// capacity bulk.SplitForRoom left past the element's bytes and ETag),
// else in one allocation of their own; their bytes are never written
// again.
func Layout(rt *route.Route, id string, ps route.Params, key *cachekey.Frame, room []byte, tags *[MaxTags]string) (uri, k string, out []string) {
	var scratch [256]byte
	b := room[:0]
	if cap(b) == 0 {
		b = scratch[:0]
	}
	b = rt.AppendPathFor(b, surrogate.URITagPrefix, rt.Batch.IDParam, id)
	ui := len(b)
	// The path, read in place by AppendKey (b's bytes are not written
	// again, and stay where they are if b grows).
	u := url.URL{Path: bytesString(b, len(surrogate.URITagPrefix), ui)}
	b = key.AppendKey(b, &u)
	ki := len(b)
	var ends [MaxTags]int
	n := len(rt.Tags)
	if n > MaxTags {
		n = 0 // expanded by entryblock.NewElement
	}
	for i, t := range rt.Tags[:n] {
		b = t.AppendExpand(b, ps)
		ends[i] = len(b)
	}
	var block []byte // b where it stays: b itself may be scratch's
	if cap(room) >= len(b) && unsafe.SliceData(b) == unsafe.SliceData(room) {
		block = room[:len(b)]
	} else {
		// Not in room: one allocation of its own, never written again.
		block = append(make([]byte, 0, len(b)), b...)
	}
	str := func(i, j int) string { return bytesString(block, i, j) }
	uri, k = str(0, ui), str(ui, ki)
	if n == 0 && len(rt.Tags) > 0 {
		return uri, k, nil
	}
	from := ki
	for i := range n {
		tags[i], from = str(from, ends[i]), ends[i]
	}
	return uri, k, tags[:n]
}

// Room is the room Layout takes for the strings of the longest of ids on
// batch route rt, which the split leaves past each element: an id they
// outgrow (one escaped in the key) gets an allocation of its own.
func Room(rt *route.Route, ids []string, key *cachekey.Frame) int {
	longest := ""
	for _, id := range ids {
		if len(id) > len(longest) {
			longest = id
		}
	}
	var scratch [256]byte
	b := rt.AppendPathFor(scratch[:0], surrogate.URITagPrefix, rt.Batch.IDParam, longest)
	u := url.URL{Path: string(b[len(surrogate.URITagPrefix):])}
	b = key.AppendKey(b, &u)
	if len(rt.Tags) <= MaxTags {
		ps := route.Params{{Key: rt.Batch.IDParam, Value: longest}}
		for _, t := range rt.Tags {
			b = t.AppendExpand(b, ps)
		}
	}
	return len(b)
}

// bytesString is b[i:j] as a string, without a copy: b's bytes there are
// never written again.
func bytesString(b []byte, i, j int) string { return unsafe.String(unsafe.SliceData(b[i:j]), j-i) }
