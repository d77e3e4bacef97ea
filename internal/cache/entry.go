// Package cache holds what every tier agrees on: the stored Entry, the small
// Store interface, the binary codec, and Tiered, which composes two stores
// into one. It never imports its implementations (l1, l2).
package cache

import (
	"context"
	"net/http"
	"time"
)

// Entry is one stored response, or a variants marker (see Variants).
//
// Freshness follows RFC 9111 §4.2: every duration below is measured on the
// current-age axis (Age), which starts at InitialAge, the age the response
// already had when it arrived. TTL is the freshness lifetime (the route's
// ttl counted from the fetch, or the origin's), the two stale windows of
// RFC 5861 extend how long the entry may still be served in the cases they
// name, and Keep how long an entry with validators stays stored past its
// freshness to be revalidated (§4.3). The tiers keep an entry for
// Lifetime(), never longer.
type Entry struct {
	Status   int
	Header   http.Header
	Body     []byte
	StoredAt time.Time

	TTL                  time.Duration
	StaleWhileRevalidate time.Duration
	StaleIfError         time.Duration
	// InitialAge is the response's age when the request for it left
	// (RFC 9111 §4.2.3 corrected_initial_age less the round trip).
	InitialAge time.Duration
	// Keep is how long past TTL the entry stays stored so that it can be
	// revalidated with a conditional request instead of fetched again.
	Keep time.Duration
	// NoStale: the response forbids serving it stale (must-revalidate,
	// proxy-revalidate, s-maxage, no-cache; RFC 9111 §5.2.2), so no
	// request directive (max-stale) may lift its freshness.
	NoStale bool

	// Tags are the resolved surrogate keys ("client:42", and the implicit
	// route tag) under which invalidation and purge find this entry.
	Tags []string

	// Variants, when set, marks an entry that holds no response: the
	// upstream answered with Vary, and the response lives under the key
	// extended with the values of these request headers (RFC 9111 §4.1).
	// Status is 0 on such a marker.
	Variants []string

	// etag, when not nil, is the entry's ETag field value (one string),
	// held outside Header, which then has no Etag: the elements of one
	// bulk answer differ in their ETags alone, so they share one
	// read-only header map instead of a map each (SetETag). Every reader
	// of the ETag goes through ETag or ETagField, so both forms (this one
	// and an Etag in Header, as the codec decodes it) read the same.
	etag []string

	// lent: Body is a slice of a buffer that holds more than the body
	// (UnmarshalOwned: an L2 reply, with its framing and encoded
	// fields), so a copy kept beyond the request needs a body of its own
	// (Tiered.promote). The slice's capacity cannot tell: the body ends
	// where the reply does.
	lent bool
}

// OwnBody is e's body as a new entry kept beyond the request may hold
// it: e's own slice, or a copy exactly as long as the body when e's is a
// slice of a larger buffer (lent from an L2 reply, or with room past its
// end), which a kept entry would otherwise pin uncharged by Size.
func (e *Entry) OwnBody() []byte {
	if !e.lent && cap(e.Body) == len(e.Body) {
		return e.Body
	}
	body := make([]byte, len(e.Body))
	copy(body, e.Body)
	return body
}

// SetETag gives e the ETag v[0] without putting it into e.Header, which
// may then be shared with other entries and must not hold an Etag: v
// (len 1) becomes the field's value as the client receives it.
func (e *Entry) SetETag(v []string) { e.etag = v[:1:1] }

// ETag is e's entity tag, "" if none: the one SetETag gave it, else its
// header's.
func (e *Entry) ETag() string {
	if e.etag != nil {
		return e.etag[0]
	}
	return e.Header.Get("Etag")
}

// FullHeader is e's header with its ETag in it: e.Header itself, or a
// copy with the ETag SetETag gave it. For a reader that needs the whole
// header as one map on a path that costs an upstream request anyway
// (revalidation).
func (e *Entry) FullHeader() http.Header {
	if e.etag == nil {
		return e.Header
	}
	h := make(http.Header, len(e.Header)+1)
	for k, v := range e.Header {
		h[k] = v
	}
	h["Etag"] = e.etag
	return h
}

// ETagField is the ETag field value SetETag gave e, nil when e's header
// holds its ETag (if any) itself: a writer of e's header adds it as the
// field Etag.
func (e *Entry) ETagField() []string { return e.etag }

// IsVariants reports whether e is a variants marker rather than a response.
func (e *Entry) IsVariants() bool { return e.Status == 0 && len(e.Variants) > 0 }

// Marker is the variants marker stored under the primary key of e, a
// response that varies on the request headers names: it says which headers
// pick the variant, and lives as long as e (RFC 9111 §4.1).
func (e *Entry) Marker(names []string) *Entry {
	return &Entry{Variants: names, StoredAt: e.StoredAt, TTL: e.TTL,
		StaleWhileRevalidate: e.StaleWhileRevalidate, StaleIfError: e.StaleIfError, Tags: e.Tags,
		InitialAge: e.InitialAge, Keep: e.Keep}
}

// Age is the entry's current age (RFC 9111 §4.2.3): the age it arrived
// with plus the time since its request left.
func (e *Entry) Age(now time.Time) time.Duration {
	if a := now.Sub(e.StoredAt); a > 0 {
		return e.InitialAge + a
	}
	return e.InitialAge
}

// Fresh reports whether e may be served without contacting the upstream.
func (e *Entry) Fresh(now time.Time) bool { return e.Age(now) < e.TTL }

// TTLLeft is the freshness left, zero once stale.
func (e *Entry) TTLLeft(now time.Time) time.Duration {
	if l := e.TTL - e.Age(now); l > 0 {
		return l
	}
	return 0
}

// WithinStaleWhileRevalidate reports whether a stale e may be served while
// one background refresh runs (RFC 5861 §3).
func (e *Entry) WithinStaleWhileRevalidate(now time.Time) bool {
	return e.Age(now) < e.TTL+e.StaleWhileRevalidate
}

// WithinStaleIfError reports whether a stale e may be served because the
// upstream failed (RFC 5861 §4).
func (e *Entry) WithinStaleIfError(now time.Time) bool {
	return e.Age(now) < e.TTL+e.StaleIfError
}

// Lifetime is how long a tier keeps e, on the age axis: freshness plus
// the longest of the stale windows and the revalidation window.
func (e *Entry) Lifetime() time.Duration {
	return e.TTL + max(e.StaleWhileRevalidate, e.StaleIfError, e.Keep)
}

// Remaining is the part of Lifetime still ahead; a tier that copies e (an L2
// hit filling L1) keeps it only this long.
func (e *Entry) Remaining(now time.Time) time.Duration {
	if r := e.Lifetime() - e.Age(now); r > 0 {
		return r
	}
	return 0
}

// Size approximates the bytes e holds in memory: the body, every header
// name and value, tags and variants, each string with its slice or map
// slot, and the fixed cost of the Entry and its header map. It leaves out
// the key the entry is stored under, which only the store knows; an L1
// charges KeyedSize.
func (e *Entry) Size() int64 { return e.SizeWith(HeaderSize(e.Header)) }

// HeaderSize is what Size charges for a header map: its names and values,
// each with its slot.
func HeaderSize(h http.Header) int64 {
	var n int64
	for k, vs := range h {
		n += int64(len(k)) + headerOverhead
		for _, v := range vs {
			n += int64(len(v)) + stringOverhead
		}
	}
	return n
}

// SizeWith is Size for hs = HeaderSize(e.Header), worked out by a caller
// that sizes many entries sharing one header map (a bulk answer's
// elements, cache.Entry.SetETag) once for all of them: walking the map is
// most of Size's cost, and it is the same walk for each.
func (e *Entry) SizeWith(hs int64) int64 {
	n := int64(len(e.Body)) + entryOverhead + hs
	if e.etag != nil {
		// Charged as the header slot it was (the shared map is charged
		// to every entry that holds it, as if its own).
		n += int64(len("Etag")) + headerOverhead + int64(len(e.etag[0])) + stringOverhead
	}
	for _, t := range e.Tags {
		n += int64(len(t)) + stringOverhead
	}
	for _, v := range e.Variants {
		n += int64(len(v)) + stringOverhead
	}
	return n
}

// KeyedSize is Size plus the key e is stored under. A cache bounded by
// Size alone can be flooded with distinct long keys whose small answers
// cost next to nothing while the keys fill the heap.
func (e *Entry) KeyedSize(key string) int64 {
	return e.KeyedSizeWith(key, HeaderSize(e.Header))
}

// KeyedSizeWith is KeyedSize for hs = HeaderSize(e.Header) (SizeWith).
func (e *Entry) KeyedSizeWith(key string, hs int64) int64 {
	return e.SizeWith(hs) + int64(len(key)) + stringOverhead
}

// The fixed costs Size charges, measured on amd64 (see l1's heap test): the
// Entry struct and its (small) header map; a header map slot with its value
// slice; a string header in a slice.
const (
	entryOverhead  = 384
	headerOverhead = 48
	stringOverhead = 16
)

// Store is what the proxy needs of a cache tier. A miss is (nil, false, nil);
// an error means the tier could not answer and the caller goes on without it.
type Store interface {
	Get(ctx context.Context, key string) (*Entry, bool, error)
	Set(ctx context.Context, key string, e *Entry) error
	Delete(ctx context.Context, keys ...string) error
}
