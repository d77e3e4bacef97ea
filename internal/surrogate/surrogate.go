// Package surrogate derives the tags a stored answer is indexed under and a
// write invalidates: the surrogate keys an upstream names in its response
// headers (Fastly's Surrogate-Key, Varnish's xkey), bounded and stripped
// before a client sees them, and the implicit tag of a URI, with the URIs
// an unsafe request's answer invalidates under RFC 9111 §4.4 (the target,
// and Location and Content-Location of the same origin).
//
// It exists apart from the proxy because these rules are pure functions of
// headers and URLs: they read alone, and their bounds (what an upstream or
// a client can make the cache hold) are checked here with table tests.
package surrogate

import (
	"net/http"
	"net/textproto"
	"slices"
	"strings"
)

// Config names the upstream response headers whose values are surrogate
// keys: each key becomes a tag of the stored entry, purged and invalidated
// exactly like a tag from the route's tags templates.
type Config struct {
	// Names are header names; nil: the upstream's headers add no tags.
	Names []string
	// Strip removes the named headers before any client sees them: they
	// describe the cache's index, not the resource.
	Strip bool
}

// The bounds on an upstream's keys: an upstream can misbehave, and every
// key of a stored entry costs memory in L1's tag index and an epoch key in
// Redis. An answer over them is served but not stored, since an entry
// stored without one of its keys would survive a purge of that key.
const (
	maxOriginTags     = 32
	maxOriginTagBytes = 256
)

// Headers is a Config resolved once: canonical names. The zero value reads
// no keys and strips nothing.
type Headers struct {
	names []string
	strip bool
}

// New resolves c.
func New(c Config) Headers {
	t := Headers{strip: c.Strip}
	for _, n := range c.Names {
		if n = textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(n)); n != "" && !slices.Contains(t.names, n) {
			t.names = append(t.names, n)
		}
	}
	return t
}

// StripFrom removes the tag headers from a response header a client is
// about to receive.
func (t Headers) StripFrom(h http.Header) {
	if !t.strip {
		return
	}
	for _, n := range t.names {
		if _, ok := h[n]; ok {
			// Only what is there: a header shared by the elements of a
			// bulk answer has them stripped already and is read
			// concurrently, so no delete may touch it.
			delete(h, n)
		}
	}
}

// Strips reports whether StripFrom removes anything.
func (t Headers) Strips() bool { return t.strip && len(t.names) > 0 }

// StripsFrom reports whether StripFrom(h) would remove a field of h.
func (t Headers) StripsFrom(h http.Header) bool {
	if !t.strip {
		return false
	}
	for _, n := range t.names {
		if _, ok := h[n]; ok {
			return true
		}
	}
	return false
}

// AppendKeys appends to tags the keys the upstream named in its tag
// headers, and reports false when they are over the bounds: the answer may
// then answer its request but must not be stored (tags then holds the keys
// read before the bound was hit).
//
// Keys are separated by spaces, tabs or commas (Surrogate-Key is
// space-separated; xkey may also be repeated or comma-separated), and
// de-duplicated against tags. Keys starting with "_" are reserved for the
// sidecar's own tags and ignored.
func (t Headers) AppendKeys(tags []string, upstream http.Header) ([]string, bool) {
	n := 0
	for _, name := range t.names {
		for _, v := range upstream[name] {
			for v != "" {
				var k string
				if i := strings.IndexFunc(v, isKeySep); i >= 0 {
					k, v = v[:i], v[i+1:]
				} else {
					k, v = v, ""
				}
				switch {
				case k == "" || k[0] == '_' || slices.Contains(tags, k):
				case n == maxOriginTags || len(k) > maxOriginTagBytes || !printable(k):
					return tags, false
				default:
					tags = append(tags, k)
					n++
				}
			}
		}
	}
	return tags, true
}

// CarryOver keeps a revalidated entry's upstream keys when the 304 names
// none (RFC 9111 §4.3.4 lets a 304 omit headers it does not change, and the
// stored copy's tag headers were stripped): the old keys go back into
// merged under the first tag header, where AppendKeys reads them (and
// StripFrom strips them), so a purge by one of them still finds the
// refreshed entry.
func (t Headers) CarryOver(merged, update http.Header, old []string) {
	if !t.strip || len(t.names) == 0 { // unstripped, the stored header still names them
		return
	}
	for _, n := range t.names {
		if len(update[n]) > 0 {
			return // the 304 says which keys hold now
		}
	}
	var keys []string
	for _, k := range old {
		if !strings.HasPrefix(k, "_") {
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		merged[t.names[0]] = []string{strings.Join(keys, " ")}
	}
}

func isKeySep(r rune) bool { return r == ' ' || r == '\t' || r == ',' }

// printable reports a key without control characters (a tag is one line
// in L2).
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return false
		}
	}
	return true
}
