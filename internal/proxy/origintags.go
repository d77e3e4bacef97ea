package proxy

import (
	"net/http"
	"net/textproto"
	"slices"
	"strings"

	"github.com/sidecache/sidecache/internal/cache"
)

// TagHeaders names the upstream response headers whose values are surrogate
// keys (Fastly's Surrogate-Key, Varnish's xkey): each key becomes a tag of
// the stored entry, purged and invalidated exactly like a tag from the
// route's tags templates.
type TagHeaders struct {
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

// tagHeaders is TagHeaders resolved once: canonical names.
type tagHeaders struct {
	names []string
	strip bool
}

func newTagHeaders(o TagHeaders) tagHeaders {
	t := tagHeaders{strip: o.Strip}
	for _, n := range o.Names {
		if n = textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(n)); n != "" && !slices.Contains(t.names, n) {
			t.names = append(t.names, n)
		}
	}
	return t
}

// stripFrom removes the tag headers from a response header a client is
// about to receive.
func (t tagHeaders) stripFrom(h http.Header) {
	if !t.strip {
		return
	}
	for _, n := range t.names {
		delete(h, n)
	}
}

// tagEntry completes the tags of e, an answer fetched for x: the implicit
// URI tag of x's path (invalidate.go) and the keys the upstream named in
// its tag headers, which it then strips from e's header (when configured).
// It reports false when the upstream's keys are over the bounds: e may
// answer its request but must not be stored.
//
// Keys are separated by spaces, tabs or commas (Surrogate-Key is
// space-separated; xkey may also be repeated or comma-separated), and
// de-duplicated. Keys starting with "_" are reserved for the sidecar's own
// tags and ignored. An element of a bulk answer carries every key of the
// whole answer: the sidecar cannot tell which key names which element, and
// over-invalidating costs a miss where under-invalidating would serve a
// purged answer.
func (x *exchange) tagEntry(e *cache.Entry, upstream http.Header) bool {
	e.Tags = append(e.Tags, URITag(x.r.URL.Path))
	th := x.h.tagh
	n, ok := 0, true
scan:
	for _, name := range th.names {
		for _, v := range upstream[name] {
			for v != "" {
				var k string
				if i := strings.IndexFunc(v, isKeySep); i >= 0 {
					k, v = v[:i], v[i+1:]
				} else {
					k, v = v, ""
				}
				switch {
				case k == "" || k[0] == '_' || slices.Contains(e.Tags, k):
				case n == maxOriginTags || len(k) > maxOriginTagBytes || !printable(k):
					ok = false
					break scan
				default:
					e.Tags = append(e.Tags, k)
					n++
				}
			}
		}
	}
	th.stripFrom(e.Header)
	if !ok {
		x.h.log.Debug("upstream tags over bounds: not stored", "route", x.rs.rt.Name, "path", x.r.URL.Path)
	}
	return ok
}

// carryOver keeps a revalidated entry's upstream keys when the 304 names
// none (RFC 9111 §4.3.4 lets a 304 omit headers it does not change, and the
// stored copy's tag headers were stripped): the old keys go back into
// merged under the first tag header, where tagEntry reads and strips them,
// so a purge by one of them still finds the refreshed entry.
func (t tagHeaders) carryOver(merged, update http.Header, old []string) {
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
