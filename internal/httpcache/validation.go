package httpcache

import (
	"net/http"
	"strings"
)

// Validation (RFC 9111 §4.3): a stale stored response that carries a
// validator is revalidated with a conditional request rather than fetched
// whole, and a 304 freshens it.

// AddConditional makes dst, the header of a request for a stored response
// of header stored, conditional (§4.3.1): If-None-Match with its entity
// tag, and If-Modified-Since with its Last-Modified. §4.3.1 prefers the
// entity tag; sending both lets an origin that knows only dates answer too.
func AddConditional(dst, stored http.Header) {
	if v := stored.Get("Etag"); v != "" {
		dst.Set("If-None-Match", v)
	}
	if v := stored.Get("Last-Modified"); v != "" {
		dst.Set("If-Modified-Since", v)
	}
}

// Confirms reports whether a 304 of header notModified selects the stored
// response of header stored: a 304 whose strong entity tag is not the
// stored one confirms another response than the one held (§4.3.4: no
// stored response is selected), and the cache must fetch it whole.
func Confirms(notModified, stored http.Header) bool {
	et := notModified.Get("Etag")
	return et == "" || strings.HasPrefix(et, "W/") || et == stored.Get("Etag")
}

// bodyFields describe the stored body itself: a 304 does not update them
// (RFC 9111 §3.2: the fields the stored response depends on; Content-Length
// named, Content-Encoding and Content-Type its examples, Content-Range
// processed by the recipient). A 304 saying Content-Encoding: gzip about a
// stored identity body relabelled it gzip for every client after.
var bodyFields = [...]string{"Content-Length", "Content-Encoding", "Content-Type", "Content-Range"}

// Freshen is the header of a stored response after a 304 (§4.3.4): each
// field the 304 carries replaces the stored one, hop-by-hop fields and the
// fields that describe the stored body (bodyFields) excepted (§3.2), and a
// stored Age is dropped unless the 304 carries one (the 304's age alone
// counts). update is the 304's header as applied. Neither argument is
// changed.
func Freshen(stored, notModified http.Header) (merged, update http.Header) {
	merged = stored.Clone()
	update = notModified.Clone()
	RemoveHopHeaders(update)
	for _, k := range bodyFields {
		delete(update, k)
	}
	for k, v := range update {
		merged[k] = v
	}
	if len(update.Values("Age")) == 0 {
		merged.Del("Age")
	}
	return merged, update
}
