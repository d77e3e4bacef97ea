package surrogate

import (
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
