package surrogate

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/sidecache/sidecache/internal/spelling"
)

// URITagPrefix starts the implicit URI tag; tags starting with "_" are
// reserved for the sidecar's own.
const URITagPrefix = "_uri:"

const uriTagPrefix = URITagPrefix

// URITag is the implicit tag of every entry stored for a request to path
// (the decoded URL path), so that a purge of that tag drops every entry of
// the path (RFC 9111 §4.4 invalidates by URI). Control characters are
// escaped: a tag is one line in L2.
func URITag(path string) string {
	if unescaped(path) {
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
// invalidates (RFC 9111 §4.4); code is the upstream's final status, 0 when
// the request reached the upstream whole and no answer came (a timeout, a
// connection reset after sending: the write may have been applied):
//
//   - 2xx or 3xx: the target URI, and the URIs in the answer's Location and
//     Content-Location when they have the request's origin (SameOriginPath
//     with hosts);
//   - 0, or a gateway's 502 or 504 (the upstream is itself a proxy that
//     could not tell): the target alone, as a route's invalidation does;
//   - anything else: none.
//
// Lenient for invalidation: a URI is tagged under each of its folded
// spellings (spelling.AppendFolds: one per integer each id may be read
// as, "/clients/0x5" as /clients/0 and /clients/5; the folded tag is the
// one every stored entry carries) and under each spelling a route could
// have stored it by (the tag entries stored before folded tags existed
// carry). A path is tagged only when stored reports
// that an entry could exist for one of its spellings (a cacheable route's
// path, within the key bound), so a flood of writes costs nothing where
// nothing is stored; each tag is listed once.
func Invalidated(code int, target *url.URL, answer http.Header, stored func(path string) bool, hosts ...string) []string {
	switch {
	case !MayBeApplied(code):
		return nil
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
	default:
		return addPath(nil, target.Path, stored)
	}
}

// MayBeApplied reports whether an unsafe request answered code (0: sent
// whole, no answer) may have been applied by the upstream, and so
// invalidates: a 2xx; a 3xx (RFC 9110 §15.4: Post/Redirect/Get's 303, or
// Rails' redirect_to after an update, answer a write that was applied);
// no answer, or a gateway's 502 or 504 (the upstream is itself a proxy
// that could not tell). A write route's tags and the write's URIs drop on
// the same answers: lenient for invalidation.
func MayBeApplied(code int) bool {
	return code == 0 || code >= 200 && code < 400 || code == http.StatusBadGateway || code == http.StatusGatewayTimeout
}

// AppendPathTags appends to tags the URI tags a write to path drops, as
// Invalidated does for its target: for a write that names path otherwise
// than as its target (a bulk write's ids, internal/writeinv).
func AppendPathTags(tags []string, path string, stored func(path string) bool) []string {
	return addPath(tags, path, stored)
}

func addPath(tags []string, path string, stored func(string) bool) []string {
	if path == "" {
		return tags
	}
	// Past spelling.MaxFolds the literal spelling alone: the write's own
	// target never is (internal/writeinv refuses it unsent), so only an
	// answer's Location can be.
	cands, _ := spelling.Candidates(path)
	found := false
	for _, p := range cands {
		if stored(p) {
			found = true
			tags = addTag(tags, URITag(p))
		}
	}
	if found {
		var buf [4]string
		folds, _ := spelling.AppendFolds(buf[:0], path)
		for _, f := range folds {
			tags = addTag(tags, URITag(f))
		}
	}
	return tags
}

// EntryURITagsOf is EntryURITags(tags, path) for tagged, which is
// URITagPrefix followed by path (route.PrefixedPathFor): when path needs no
// escaping tagged is its URI tag, and is not built again.
func EntryURITagsOf(tags []string, tagged string) []string {
	path, ok := strings.CutPrefix(tagged, uriTagPrefix)
	if !ok || !unescaped(path) {
		return EntryURITags(tags, path)
	}
	folded := spelling.Fold(path)
	if folded == path {
		return addTag(tags, tagged)
	}
	return addTag(addTag(tags, URITag(folded)), tagged)
}

// unescaped reports whether URITag(path) is the prefix and path as is.
func unescaped(path string) bool {
	for i := 0; i < len(path); i++ {
		if path[i] < 0x20 || path[i] == 0x7f {
			return false
		}
	}
	return true
}

func addTag(tags []string, t string) []string {
	if slices.Contains(tags, t) {
		return tags
	}
	return append(tags, t)
}

// FoldedURITag is the URI tag of path's folded spelling (spelling.Fold):
// the one tag every spelling of a resource shares, carried by every stored
// entry, so that a write under any spelling reaches the entry stored under
// the canonical one.
func FoldedURITag(path string) string { return URITag(spelling.Fold(path)) }

// EntryURITags appends to tags the URI tags of an entry stored for path:
// its folded tag, and its literal one when that differs (a replica of the
// previous release, during a rolling deploy, invalidates the literal one).
// A stored path has one folded spelling: no segment of it reads as
// several integers (strict for storage: spelling.CanonicalPath).
func EntryURITags(tags []string, path string) []string {
	folded := spelling.Fold(path)
	tags = addTag(tags, URITag(folded))
	if folded == path {
		return tags // one tag: no second string to build only to find it there
	}
	return addTag(tags, URITag(path))
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
