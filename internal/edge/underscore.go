package edge

import (
	"net/http"
	"net/textproto"
	"slices"
	"strings"

	"github.com/sidecache/sidecache/internal/clientaddr"
)

// Underscore spellings. CGI (RFC 3875 §4.1.18) and what follows it — WSGI
// (PEP 3333), PHP's $_SERVER, Rack — hand an application each request
// field as HTTP_ plus its name upper-cased with '-' read as '_', so
// X_Forwarded_For and X-Forwarded-For both arrive as HTTP_X_FORWARDED_FOR,
// the later line winning or the two joined, as the server has it. A
// client that sends X_Forwarded_For: 6.6.6.6 beside the X-Forwarded-For
// the sidecar writes can so spoof its address, and X-Forwarded_Host its
// host, to such an application; X_Tenant beside a keyed X-Tenant makes
// the upstream answer for a tenant the key does not hold.
//
// The rule is the narrow one: a field whose name holds '_' is dropped
// when its name with '_' read as '-' is (case aside) one the sidecar
// writes, strips, frames by or keys on (Reserved, Options.Keyed), on
// every path, since the Guard is before all of them. Any other name with
// '_' goes on: field names may hold it (RFC 9110 §5.1, token), and
// applications use such fields, which NGINX's blanket refusal
// (underscores_in_headers off, its default) drops with no word — a
// silent break in front of an application that relied on one. A name
// that holds no '-' has no other spelling to be confused with, so only
// hyphenated names matter.
func dropUnderscored(h http.Header, keyed func(string) bool) {
	for k := range h {
		if strings.IndexByte(k, '_') < 0 {
			continue // every request's fields, nearly always
		}
		if n := textproto.CanonicalMIMEHeaderKey(strings.ReplaceAll(k, "_", "-")); Reserved(n) || keyed != nil && keyed(n) {
			delete(h, k)
		}
	}
}

// Reserved reports whether a canonical field name is one the sidecar
// itself writes on the upstream request, strips from it, or frames it
// by: the forwarding fields (RFC 7239, X-Forwarded-*, the address claims
// of clientaddr: X-Real-Ip, True-Client-Ip, ...), its
// request id and trace context, the hop-by-hop fields (RFC 9110 §7.6.1),
// the framing ones (RFC 9112 §6), and the preconditions the cached path
// replaces with its own (RFC 9110 §13.1).
func Reserved(name string) bool {
	return strings.HasPrefix(name, "X-Forwarded-") || strings.HasPrefix(name, "X-B3-") ||
		clientaddr.Replaced(name) || slices.Contains(reserved[:], name)
}

var reserved = [...]string{
	"Forwarded", "Via", "X-Request-Id", "Traceparent", "Tracestate", "Baggage",
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Http2-Settings",
	"Host", "Content-Length", "Max-Forwards", "Expect",
	"If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since", "If-Range", "Range",
	"Accept-Encoding",
}
