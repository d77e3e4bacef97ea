package proxy

import (
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// cacheableStatus is the set of statuses a route may store (RFC 9111 §3
// leaves this to the cache; these are the "heuristically cacheable" codes of
// RFC 9110 §15.1 that a sidecar can reproduce). 404 and 410 are stored only
// under negative_ttl.
func cacheableStatus(code int, negativeTTL time.Duration) (ttlFromNegative, ok bool) {
	switch code {
	case 200, 203, 204, 300, 301:
		return false, true
	case 404, 410:
		return true, negativeTTL > 0
	}
	return false, false
}

// cacheControlHas reports whether a Cache-Control field holds the directive
// (RFC 9111 §5.2: case-insensitive, comma-separated, arguments ignored).
func cacheControlHas(h http.Header, directive string) bool {
	for _, line := range h.Values("Cache-Control") {
		for line != "" {
			var d string
			d, line, _ = strings.Cut(line, ",")
			d = strings.TrimSpace(d)
			if name, _, _ := strings.Cut(d, "="); strings.EqualFold(strings.TrimSpace(name), directive) {
				return true
			}
		}
	}
	return false
}

// private reports whether a response belongs to one client: one that sets a
// cookie or is marked private or no-store belongs to one client only
// (RFC 9111 §3, §5.2.2.3, §5.2.2.7), and such a response is never handed to
// a coalesced waiter either — that is the leak other caches have had.
func private(h http.Header) bool {
	return len(h.Values("Set-Cookie")) > 0 ||
		cacheControlHas(h, "private") ||
		cacheControlHas(h, "no-store")
}

// bypassReason names why a request skips the cache, or "" when it does not.
// Credentials make a response personal (RFC 9111 §3.5) unless the route keys
// on that header (even public or s-maxage on the answer does not lift this:
// the key would not see the credential); Range is passed through whole
// rather than cached in parts.
func bypassReason(r *http.Request, keyHeaders []string) string {
	if r.Header.Get("Authorization") != "" && !listed(keyHeaders, "Authorization") {
		return "authorization"
	}
	if r.Header.Get("Cookie") != "" && !listed(keyHeaders, "Cookie") {
		return "cookie"
	}
	if r.Header.Get("Range") != "" {
		return "range"
	}
	if r.Header.Get("If-Match") != "" || r.Header.Get("If-Unmodified-Since") != "" {
		// Preconditions only the origin can evaluate (RFC 9111 §4.3.2):
		// answering them from a stored copy would turn the origin's 412
		// into a 200.
		return "precondition"
	}
	if cacheControlHas(r.Header, "no-store") {
		return "no-store"
	}
	return ""
}

func listed(names []string, name string) bool {
	for _, n := range names {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}

// refreshRequested reports a client's request to skip stored responses
// (RFC 9111 §5.2.1.4 no-cache; §5.4 Pragma for HTTP/1.0 clients).
func refreshRequested(r *http.Request) bool {
	if cacheControlHas(r.Header, "no-cache") {
		return true
	}
	return len(r.Header.Values("Cache-Control")) == 0 && strings.EqualFold(strings.TrimSpace(r.Header.Get("Pragma")), "no-cache")
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

// removeHopHeaders drops hop-by-hop fields and any named in Connection.
func removeHopHeaders(h http.Header) {
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

// storedHeader is the header an entry keeps: the response's own minus
// hop-by-hop fields and the fields the cache itself sets on every answer
// (Age, Content-Length). An upstream Cache-Status is kept: this cache
// appends its own member to it (RFC 9211 §2). A response with Set-Cookie is never
// stored or shared (see private), so the cookie only reaches the client
// whose request fetched it.
func storedHeader(src http.Header) http.Header {
	h := src.Clone()
	removeHopHeaders(h)
	h.Del("Age")
	h.Del("Content-Length")
	return h
}

// notModified evaluates a client's conditional GET against a stored 200
// (RFC 9110 §13.2.2: If-None-Match first, If-Modified-Since only without it).
func notModified(r *http.Request, stored http.Header) bool {
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		if strings.TrimSpace(inm) == "*" {
			return true // any current representation matches (RFC 9110 §13.1.2)
		}
		etag := stored.Get("Etag")
		if etag == "" {
			return false
		}
		return etagMatchWeak(inm, etag)
	}
	ims := r.Header.Get("If-Modified-Since")
	lm := stored.Get("Last-Modified")
	if lm == "" {
		lm = stored.Get("Date") // RFC 9111 §4.3.2: Date stands in for Last-Modified
	}
	if ims == "" || lm == "" {
		return false
	}
	t, err := http.ParseTime(ims)
	if err != nil {
		return false
	}
	m, err := http.ParseTime(lm)
	return err == nil && !m.After(t)
}

// etagMatchWeak applies the weak comparison of RFC 9110 §8.8.3.2, which is
// the one If-None-Match uses (§13.1.2).
func etagMatchWeak(list, etag string) bool {
	want := strings.TrimPrefix(etag, "W/")
	for list != "" {
		var tag string
		tag, list, _ = strings.Cut(list, ",")
		if strings.TrimPrefix(strings.TrimSpace(tag), "W/") == want {
			return true
		}
	}
	return false
}

// notModifiedHeaders are the fields a 304 carries over from the stored 200
// (RFC 9110 §15.4.5).
var notModifiedHeaders = [...]string{"Cache-Control", "Content-Location", "Date", "Etag", "Expires", "Last-Modified", "Vary"}

// appendCacheStatus adds this cache's member after the ones caches nearer
// the origin wrote (RFC 9211 §2: the field is a list, origin side first).
func appendCacheStatus(prev, ours string) string {
	if prev == "" {
		return ours
	}
	return prev + ", " + ours
}

// status builds an RFC 9211 Cache-Status field value for this cache.
type status struct {
	hit       bool
	fwd       string // miss, stale, bypass, method, request, uri-miss
	fwdStatus int
	ttl       time.Duration
	hasTTL    bool
	stored    bool
	collapsed bool
	detail    string
}

func (s status) String() string {
	b := make([]byte, 0, 64)
	b = append(b, "sidecache"...)
	if s.hit {
		b = append(b, "; hit"...)
	}
	if s.fwd != "" {
		b = append(b, "; fwd="...)
		b = append(b, s.fwd...)
	}
	if s.fwdStatus != 0 {
		b = append(b, "; fwd-status="...)
		b = strconv.AppendInt(b, int64(s.fwdStatus), 10)
	}
	if s.hasTTL {
		b = append(b, "; ttl="...)
		b = strconv.AppendInt(b, int64(s.ttl/time.Second), 10)
	}
	if s.stored {
		b = append(b, "; stored"...)
	}
	if s.collapsed {
		b = append(b, "; collapsed"...)
	}
	if s.detail != "" {
		b = append(b, "; detail="...)
		b = append(b, s.detail...)
	}
	return string(b)
}
