package httpcache

import (
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"time"
)

// CacheableStatus is the set of statuses a route with its own freshness
// may store (RFC 9111 §3 leaves this to the cache; these are the
// "heuristically cacheable" codes of RFC 9110 §15.1 that a sidecar can
// reproduce). 404 and 410 are stored only under a negative TTL, and then
// for that TTL (ttlFromNegative).
func CacheableStatus(code int, negativeTTL time.Duration) (ttlFromNegative, ok bool) {
	switch code {
	case 200, 203, 204, 300, 301:
		return false, true
	case 404, 410:
		return true, negativeTTL > 0
	}
	return false, false
}

// Private reports whether a response belongs to one client: one that sets a
// cookie or is marked private or no-store belongs to one client only
// (RFC 9111 §3, §5.2.2.3, §5.2.2.7), and such a response is never handed to
// a coalesced waiter either — that is the leak other caches have had. A
// no-store in a targeted field counts as one in Cache-Control
// (TargetedNoStore).
func Private(h http.Header) bool {
	return SetsCookie(h) ||
		HasDirective(h, "private") ||
		HasDirective(h, "no-store") ||
		TargetedNoStore(h)
}

// storeFields are the fields besides Cache-Control by which an origin
// addresses a cache between it and the client: RFC 9213's
// CDN-Cache-Control and the Edge Architecture's Surrogate-Control. Spelt
// as net/http keys them (CanonicalMIMEHeaderKey): a lookup then copies
// nothing, where "CDN-Cache-Control" cost an allocation per answer and
// per bulk element.
var storeFields = [...]string{"Cdn-Cache-Control", "Surrogate-Control"}

// TargetedNoStore reports whether a CDN-Cache-Control or Surrogate-Control
// field of h names no-store, however it is spelt (a stray word included,
// as in Cache-Control: directives.go), whether or not this cache obeys the
// field's other directives (a route's ttl, targeted_fields): strict for
// storage, a no-store anywhere an origin may address a cache is never
// stored nor shared, as Varnish's built-in VCL refuses Surrogate-Control:
// no-store. A Surrogate-Control directive aimed at one device ("no-store;
// edge1") counts as well: the sidecar has no device token to tell.
func TargetedNoStore(h http.Header) bool {
	for _, f := range storeFields {
		if hasFieldDirective(h, f, "no-store") {
			return true
		}
	}
	return false
}

// SetsCookie reports whether h sets a cookie: Set-Cookie (RFC 6265 §4.1)
// or the obsolete Set-Cookie2 (RFC 2965 §3.2.2), which a few stacks still
// send and a client may still honour; either was minted for one client.
func SetsCookie(h http.Header) bool {
	return len(h.Values("Set-Cookie")) > 0 || len(h.Values("Set-Cookie2")) > 0
}

// hopHeaders are removed from stored responses and from forwarded requests,
// as net/http/httputil.ReverseProxy does (RFC 9110 §7.6.1).
var hopHeaders = [...]string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// conditionalHeaders are never forwarded on the cached path: the cache
// wants a full response to store, and answers conditionals itself
// (RFC 9110 §13.1). Range belongs with them: a part is not the resource.
var conditionalHeaders = [...]string{"If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since", "If-Range", "Range"}

// IsHopHeader reports whether the canonical field name k is one of the
// fixed hop-by-hop fields (RFC 9110 §7.6.1).
func IsHopHeader(k string) bool { return slices.Contains(hopHeaders[:], k) }

// IsConditionalHeader reports whether the canonical field name k makes a
// request conditional or partial (RFC 9110 §13.1, §14.2).
func IsConditionalHeader(k string) bool { return slices.Contains(conditionalHeaders[:], k) }

// IsExpect reports whether the canonical field name k is Expect, which no
// upstream request carries, on any path (pass-through, write, fill, bulk
// call), as NGINX's proxy sends none: the sidecar answers a client's
// 100-continue itself — net/http's server sends the 100 as the body is
// first read, once the upstream request is under way — and sends the
// body at once (RFC 9110 §10.1.1 lets a proxy forward the request
// without waiting). Forwarded, it made http.Transport hold the body
// back for the upstream's own 100, and an upstream that ignores Expect
// (as many do) and waits for the body stalled every such request for
// the Transport's ExpectContinueTimeout, the client's 100 with it.
func IsExpect(k string) bool { return k == "Expect" }

// RemoveHopHeaders drops hop-by-hop fields and any named in Connection.
func RemoveHopHeaders(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, sf := range strings.Split(f, ",") {
			if sf = textproto.TrimString(sf); sf != "" {
				h.Del(sf)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// StoredHeader is the header an entry keeps: the response's own minus
// hop-by-hop fields and the fields the cache itself sets on every answer
// (Age, Content-Length), its Content-Encoding lines folded into one
// (ContentCoding). An upstream Cache-Status is kept: this cache
// appends its own member to it (RFC 9211 §2). A response with Set-Cookie is
// never stored or shared (see Private), so the cookie only reaches the
// client whose request fetched it.
func StoredHeader(src http.Header) http.Header {
	h := src.Clone()
	RemoveHopHeaders(h)
	h.Del("Age")
	h.Del("Content-Length")
	foldCoding(h)
	return h
}

// HeaderBytes is the size of h as HTTP/1.1 field lines ("k: v\r\n"): a huge
// header is as costly to keep as a huge body.
func HeaderBytes(h http.Header) int64 {
	var n int64
	for k, vs := range h {
		for _, v := range vs {
			n += int64(len(k) + len(v) + 4) // "k: v\r\n"
		}
	}
	return n
}

// HasValidator reports whether a stored header lets the entry be
// revalidated with a conditional request (RFC 9111 §4.3.1).
func HasValidator(h http.Header) bool {
	return h.Get("Etag") != "" || h.Get("Last-Modified") != ""
}

// The revalidation window: an entry with a validator stays stored past its
// freshness (and stale windows) for its freshness lifetime again, at least
// MinKeep and at most MaxKeep, so that a request after it went stale costs
// a 304 instead of a whole body (RFC 9111 §4.3). Bounded so that an
// upstream's validators cannot make entries live forever.
const (
	MinKeep = 10 * time.Minute
	MaxKeep = time.Hour
)

// KeepFor is the revalidation window of an entry of header h and freshness
// lifetime life; 0 without a validator.
func KeepFor(h http.Header, life time.Duration) time.Duration {
	return KeepWindow(HasValidator(h), life)
}

// KeepWindow is KeepFor for an entry that has a validator or not.
func KeepWindow(validator bool, life time.Duration) time.Duration {
	if !validator {
		return 0
	}
	return min(max(life, MinKeep), MaxKeep)
}

// AgeAtRequest is the age an answer already had when its request left
// (RFC 9111 §4.2.3): InitialAge (corrected_initial_age) less the round
// trip, which a stored entry's own clock, started at the request time,
// counts again.
func AgeAtRequest(h http.Header, requested, received time.Time) time.Duration {
	return max(InitialAge(h, requested, received)-max(received.Sub(requested), 0), 0)
}

// AddVia appends a proxy's member via[0] to an answer's Via (RFC 9110
// §7.6.3: a proxy sends Via in each message it forwards, responses too),
// after the upstream's own; via nil: nothing. The stored or received slice
// is never appended to in place (capped), and an answer without Via gets
// via itself, read-only: no allocation on the common path.
func AddVia(hdr http.Header, via []string) {
	if via == nil {
		return
	}
	if v := hdr["Via"]; len(v) > 0 {
		hdr["Via"] = append(v[:len(v):len(v)], via[0])
		return
	}
	hdr["Via"] = via[:1:1]
}
