package httpcache

import (
	"net/http"
	"strings"
)

// forbiddenTrailers are fields that must not come as trailers
// (RFC 9110 §6.5.1): a recipient that merged them into the header would
// let the end of a body change its framing (Transfer-Encoding,
// Content-Length), routing (Host), request modifiers and controls
// (RFC 9111 §5.2, RFC 9110 §13), authentication (RFC 9110 §11, RFC 6265's
// cookies), response control data (RFC 9110 §15, RFC 9111 §5) or how the
// content is processed (Content-*, Trailer itself). The hop-by-hop fields
// describe one connection (RFC 9110 §7.6.1). Canonical keys; Content-* is
// matched by prefix (ContentTrailer).
var forbiddenTrailers = [...]string{
	"Transfer-Encoding", "Host", "Trailer", "Te",
	"Connection", "Keep-Alive", "Proxy-Connection", "Upgrade",
	"Cache-Control", "Expect", "Max-Forwards", "Pragma", "Range",
	"If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since", "If-Range",
	"Authorization", "Proxy-Authenticate", "Proxy-Authorization", "Www-Authenticate",
	"Set-Cookie", "Set-Cookie2", "Cookie", "Cookie2",
	"Age", "Expires", "Date", "Location", "Retry-After", "Vary", "Warning",
}

// ForbiddenTrailer reports whether the canonical field name k may not be
// relayed as a trailer (RFC 9110 §6.5.1).
func ForbiddenTrailer(k string) bool {
	if strings.HasPrefix(k, "Content-") {
		return true
	}
	for _, f := range forbiddenTrailers {
		if f == k {
			return true
		}
	}
	return false
}

// RemoveForbiddenTrailers deletes the fields ForbiddenTrailer names from a
// trailer section (or the names a Trailer field announced).
func RemoveForbiddenTrailers(t http.Header) {
	for k := range t {
		if ForbiddenTrailer(http.CanonicalHeaderKey(k)) {
			delete(t, k)
		}
	}
}
