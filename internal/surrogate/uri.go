package surrogate

import (
	"net/http"
	"net/url"
	"strings"
)

// uriTagPrefix starts the implicit URI tag; tags starting with "_" are
// reserved for the sidecar's own.
const uriTagPrefix = "_uri:"

// URITag is the implicit tag of every entry stored for a request to path
// (the decoded URL path), so that a purge of that tag drops every entry of
// the path (RFC 9111 §4.4 invalidates by URI). Control characters are
// escaped: a tag is one line in L2.
func URITag(path string) string {
	clean := true
	for i := 0; i < len(path); i++ {
		if path[i] < 0x20 || path[i] == 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return uriTagPrefix + path
	}
	var b strings.Builder
	b.WriteString(uriTagPrefix)
	for i := 0; i < len(path); i++ {
		if c := path[i]; c < 0x20 || c == 0x7f {
			const hex = "0123456789ABCDEF"
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// SameOriginPath resolves ref, a Location or Content-Location value,
// against base (the request's URL) and returns its path when it has the
// request's origin: relative, or absolute http(s) naming one of hosts (the
// request's Host, the upstream's). Anything else is not ok, so an answer
// cannot invalidate another origin's URIs (RFC 9111 §4.4).
func SameOriginPath(base *url.URL, ref string, hosts ...string) (string, bool) {
	ru, err := base.Parse(ref)
	if err != nil {
		return "", false
	}
	if ru.Host != "" || ru.Scheme != "" {
		if ru.Scheme != "http" && ru.Scheme != "https" {
			return "", false
		}
		h := normHost(ru.Host)
		same := false
		for _, o := range hosts {
			if h == normHost(o) {
				same = true
				break
			}
		}
		if !same {
			return "", false
		}
	}
	return ru.Path, true
}

// Invalidated is the URI tags the answer to an unsafe request for target
// invalidates (RFC 9111 §4.4); code is the answer's final status, 0 when
// none was written (the client left before the upstream answered: the
// write may still have been applied):
//
//   - 2xx or 3xx: the target URI, and the URIs in the answer's Location and
//     Content-Location when they have the request's origin (SameOriginPath
//     with hosts);
//   - 0, 502 or 504 (a cache's own answer to a write whose outcome is
//     unknown: a timeout, a broken connection): the target alone, as a
//     route's invalidation does;
//   - anything else: none.
//
// A path is tagged only when stored reports that an entry could exist for
// it (a cacheable route's path, within the key bound), so a flood of
// writes costs nothing where nothing is stored; each tag is listed once.
func Invalidated(code int, target *url.URL, answer http.Header, stored func(path string) bool, hosts ...string) []string {
	switch {
	case code >= 200 && code < 400:
		tags := addPath(make([]string, 0, 3), target.Path, stored)
		for _, name := range [...]string{"Location", "Content-Location"} {
			if v := answer.Get(name); v != "" {
				if p, ok := SameOriginPath(target, v, hosts...); ok {
					tags = addPath(tags, p, stored)
				}
			}
		}
		return tags
	case code == 0 || code == http.StatusBadGateway || code == http.StatusGatewayTimeout:
		return addPath(nil, target.Path, stored)
	}
	return nil
}

func addPath(tags []string, path string, stored func(string) bool) []string {
	if path == "" || !stored(path) {
		return tags
	}
	t := URITag(path)
	for _, have := range tags {
		if have == t {
			return tags
		}
	}
	return append(tags, t)
}

// normHost lower-cases a host and drops a default port; the scheme the
// client used is not known behind a TLS terminator, so either default is.
func normHost(h string) string {
	h = strings.ToLower(h)
	if s, ok := strings.CutSuffix(h, ":80"); ok {
		return s
	}
	if s, ok := strings.CutSuffix(h, ":443"); ok {
		return s
	}
	return h
}
