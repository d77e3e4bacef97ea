package httpcache

import (
	"net/http"
	"net/textproto"
	"slices"
	"strings"
)

// HasDirective reports whether a Cache-Control field of h holds the
// directive (RFC 9111 §5.2: case-insensitive, comma-separated, arguments
// ignored). It is the cheap test the request path makes on every request;
// unlike Parse it does not read quoted arguments, so a comma inside one
// splits it. As Parse, it finds no-store, private and no-cache as stray
// words too ("private; max-age=0": directives.go), so the two readings
// agree on whether an answer may be stored or shared.
func HasDirective(h http.Header, directive string) bool {
	return hasFieldDirective(h, "Cache-Control", directive)
}

// hasFieldDirective is HasDirective on the Cache-Control-like field name
// (canonical) of h.
func hasFieldDirective(h http.Header, name, directive string) bool {
	stray := restrictive(directive)
	for _, line := range h.Values(name) {
		for line != "" {
			var d string
			d, line, _ = strings.Cut(line, ",")
			name, arg, _ := strings.Cut(d, "=")
			name = strings.TrimSpace(name)
			if strings.EqualFold(name, directive) {
				return true
			}
			if !stray {
				continue
			}
			// A stray (directives.go): "private; max-age=0",
			// "max-age=60 private".
			if _, rest := splitWord(arg); !isToken(name) && hasWord(name, directive) ||
				!strings.HasPrefix(strings.TrimLeft(arg, " \t"), `"`) && hasWord(rest, directive) {
				return true
			}
		}
	}
	return false
}

// restrictive reports the directives a stray word may set (directives.go).
func restrictive(directive string) bool {
	return strings.EqualFold(directive, "no-store") || strings.EqualFold(directive, "private") ||
		strings.EqualFold(directive, "no-cache")
}

// hasWord reports whether one of the words of s is w, in any case.
func hasWord(s, w string) bool {
	for s != "" {
		var x string
		x, s = splitWord(s)
		if strings.EqualFold(x, w) {
			return true
		}
	}
	return false
}

// BypassReason names why a request skips the cache, or "" when it does not.
// Credentials make a response personal (RFC 9111 §3.5) unless the route keys
// on that header (even public or s-maxage on the answer does not lift this:
// the key would not see the credential); Range is passed through whole
// rather than cached in parts.
//
// Every field line counts, not the first: an upstream reads them all
// (RFC 9110 §5.3 joins them), so "Cookie:" (empty) followed by
// "Cookie: session=…" is a credentialed request.
func BypassReason(r *http.Request, keyHeaders []string) string {
	if Present(r.Header, "Authorization") && !listed(keyHeaders, "Authorization") {
		return "authorization"
	}
	if Present(r.Header, "Cookie") && !listed(keyHeaders, "Cookie") {
		return "cookie"
	}
	if Present(r.Header, "Range") {
		return "range"
	}
	if Present(r.Header, "If-Match") || Present(r.Header, "If-Unmodified-Since") {
		// Preconditions only the origin can evaluate (RFC 9111 §4.3.2):
		// answering them from a stored copy would turn the origin's 412
		// into a 200.
		return "precondition"
	}
	if HasDirective(r.Header, "no-store") {
		return "no-store"
	}
	return ""
}

// Present reports whether any field line of the canonical name carries a
// value: unlike h.Get, which reads the first line only, an empty first line
// does not hide a later one.
func Present(h http.Header, canon string) bool {
	for _, v := range h[canon] {
		if strings.Trim(v, " \t") != "" {
			return true
		}
	}
	return false
}

func listed(names []string, name string) bool {
	for _, n := range names {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}

// RefreshRequested reports a client's request to skip stored responses
// (RFC 9111 §5.2.1.4 no-cache; §5.4 Pragma for HTTP/1.0 clients).
func RefreshRequested(r *http.Request) bool {
	if HasDirective(r.Header, "no-cache") {
		return true
	}
	return len(r.Header.Values("Cache-Control")) == 0 && strings.EqualFold(strings.TrimSpace(r.Header.Get("Pragma")), "no-cache")
}

// MaxAgeZero reports a request's Cache-Control: max-age=0 (RFC 9111
// §5.2.1.1): no stored response is fresh enough for it.
func MaxAgeZero(r *http.Request) bool {
	if len(r.Header.Values("Cache-Control")) == 0 {
		return false
	}
	d := Parse(r.Header, "Cache-Control")
	return d.MaxAge.Set && d.MaxAge.D == 0
}

// SafeMethod reports the methods that never invalidate stored responses
// (RFC 9110 §9.2.1, RFC 9111 §4.4).
func SafeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions || m == http.MethodTrace
}

// knownMethods are the methods the sidecar knows by name, each in its one
// registered spelling (upper case): RFC 9110 §9's, PATCH (RFC 5789),
// WebDAV's (RFC 4918, RFC 3253 REPORT, RFC 5323 SEARCH) and QUERY. A
// route may list only these (internal/config).
var knownMethods = [...]string{
	"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT",
	"PROPFIND", "PROPPATCH", "MKCOL", "COPY", "MOVE", "LOCK", "UNLOCK", "REPORT", "SEARCH", "QUERY",
}

// KnownMethods returns the methods the sidecar knows by name (a copy).
func KnownMethods() []string { return slices.Clone(knownMethods[:]) }

// MisspelledMethod reports a method spelled with a lower-case letter whose
// upper case is a method the sidecar knows: get, Get, pOST, patch. Method
// names are case-sensitive (RFC 9110 §9.1), so "get" is not GET and is
// neither safe nor a route's; but Werkzeug upper-cases the method and
// ASP.NET Core's routing compares it without case, so an app may apply it
// as the method it spells. Taken for a write, any client could drop any
// entry with a read the app answers 200; taken for the read, a lower-case
// write would drop nothing. The proxy refuses it 400 unsent, as NGINX
// refuses any method with a lower-case letter. A token that spells no
// known method (a custom method, whatever its case) is not one: the
// sidecar and an app that folds case take it alike, for a method no route
// lists.
func MisspelledMethod(m string) bool {
	for i := 0; i < len(m); i++ {
		if 'a' <= m[i] && m[i] <= 'z' {
			return slices.Contains(knownMethods[:], strings.ToUpper(m))
		}
	}
	return false // every request's method, nearly always
}

// overrideFields are the method override fields, canonical.
var overrideFields = [...]string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}

// Overridden reports whether h carries a method override field naming a
// method other than GET or HEAD, under any spelling of its name a
// framework reads as it ('_' for '-', any case): the app may apply the
// request as that method, whatever its request line says. Express's
// method-override and ASP.NET Core read X-HTTP-Method-Override on a POST,
// the override middleware Flask's documentation gives on any method, a
// GET included; OData reads X-HTTP-Method; a CGI-style stack (WSGI, Rack,
// PHP) reads X_HTTP_Method_Override as the first. Such a request is
// neither safe nor idempotent (RFC 9110 §9.2), whatever its method says:
// the proxy refuses it on a safe method, and a write carrying one
// invalidates as the method it names too (internal/writeinv).
func Overridden(h http.Header) bool {
	return anyOverride(h, func(v string) bool {
		return v != "" && !strings.EqualFold(v, http.MethodGet) && !strings.EqualFold(v, http.MethodHead)
	})
}

// OverrideNames reports whether one of h's method override fields names
// method m (upper case), its value read without case.
func OverrideNames(h http.Header, m string) bool {
	return anyOverride(h, func(v string) bool { return strings.EqualFold(v, m) })
}

// anyOverride reports whether a value of one of h's method override
// fields, trimmed, satisfies match.
func anyOverride(h http.Header, match func(string) bool) bool {
	for k, vs := range h {
		if !overrideField(k) {
			continue
		}
		for _, v := range vs {
			if match(strings.TrimSpace(v)) {
				return true
			}
		}
	}
	return false
}

// overrideField reports whether the field name k is a method override
// field, as a framework reads names.
func overrideField(k string) bool {
	if len(k) < len("X-Http-Method") || k[0] != 'X' && k[0] != 'x' {
		return false // every request's fields, nearly always
	}
	n := textproto.CanonicalMIMEHeaderKey(strings.ReplaceAll(k, "_", "-"))
	return slices.Contains(overrideFields[:], n)
}

// NotModified evaluates a client's conditional GET against a stored 200
// (RFC 9110 §13.2.2: If-None-Match first, If-Modified-Since only without it).
//
// If-None-Match is read from every field line (§5.3 joins them), as the
// bypass reads Cookie: an empty first line must not hide the list and let
// If-Modified-Since decide instead. If-Modified-Since is ignored unless it
// is one valid date (§13.1.3). Without a Last-Modified, the stored Date
// stands in (RFC 9111 §4.3.2), but only when it is strictly earlier than
// the client's date: Date has one-second resolution, so a copy the client
// holds and a stored answer made after a write in the same second share it
// (a date-derived validator is weak within its second, RFC 9110 §8.8.2.2),
// and a 304 would keep the client on the copy from before the write.
func NotModified(r *http.Request, stored http.Header) bool {
	return NotModifiedTag(r, stored.Get("Etag"), stored)
}

// NotModifiedTag is NotModified for a stored response whose entity tag is
// etag ("" if none), whatever its header holds under Etag: an entry may
// keep its ETag outside its header (cache.Entry.SetETag).
func NotModifiedTag(r *http.Request, etag string, stored http.Header) bool {
	if Present(r.Header, "If-None-Match") {
		for _, line := range r.Header["If-None-Match"] {
			for _, tag := range strings.Split(line, ",") {
				if tag = strings.TrimSpace(tag); tag == "*" {
					return true // any current representation matches (RFC 9110 §13.1.2)
				}
			}
			if etag != "" && etagMatchWeak(line, etag) {
				return true
			}
		}
		return false
	}
	ims := r.Header.Values("If-Modified-Since")
	if len(ims) != 1 {
		return false
	}
	t, err := ParseDate(ims[0])
	if err != nil {
		return false
	}
	if lm := stored.Get("Last-Modified"); lm != "" {
		m, err := ParseDate(lm)
		return err == nil && !m.After(t)
	}
	d, err := ParseDate(stored.Get("Date"))
	return err == nil && d.Before(t)
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
