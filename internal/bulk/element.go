package bulk

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"unsafe"

	"golang.org/x/crypto/blake2b"
)

// representation are the fields of a bulk answer that describe the bytes
// of the whole array, not of one element (RFC 9110 §8: representation
// metadata and validators), and Set-Cookie (and the obsolete Set-Cookie2,
// RFC 2965), minted for the client whose request opened the batch. An
// element never carries them.
var representation = [...]string{
	"Content-Length", "Content-Encoding", "Content-Range", "Content-Location",
	"Etag", "Digest", "Content-Digest", "Repr-Digest", "Content-Md5", "Vary", "Set-Cookie", "Set-Cookie2",
}

// cookieFields are the fields by which an answer sets a cookie
// (RFC 6265 §4.1, and the obsolete Set-Cookie2 of RFC 2965).
var cookieFields = [...]string{"Set-Cookie", "Set-Cookie2"}

// OpenerCookies copies the cookies the bulk answer whose header is
// upstream sets into h, the header of one of its elements that answers
// the request whose headers the call carried alone (private to it: the
// answer sets a cookie, RFC 9111 §7.3, or is otherwise no other
// request's). That request caused the call: had its client called the
// upstream itself for its id, the cookie was its own, and NGINX or
// Varnish in front of the per-id URL hands the client whose request
// fetched an answer its Set-Cookie while caching nothing of it. An
// element that may be shared never carries one (ElementHeader drops
// them). h is modified; the values are copies.
func OpenerCookies(h, upstream http.Header) {
	for _, k := range cookieFields {
		if v := upstream[k]; len(v) > 0 {
			h[k] = slices.Clone(v)
		}
	}
}

// ElementHeader is the header of one element of a bulk answer whose stored
// header (hop-by-hop fields, Age and Content-Length removed) is h: what the
// app said of the whole answer that holds for each element — its freshness
// (Cache-Control, Expires, Date; RFC 9111 §4.2), Content-Type, Last-Modified
// (an element changed no later than the array) and its other fields —
// without the fields that describe the array's bytes (representation).
// vary, if not empty, becomes the element's Vary. A 200 element gets etag
// as its ETag, or, if etag is "", a strong one over its bytes (ETag), so
// clients can revalidate it and get 304s. h is modified and returned.
func ElementHeader(h http.Header, status int, body []byte, vary []string, etag string) http.Header {
	for _, k := range representation {
		delete(h, k)
	}
	if status != http.StatusOK || h.Get("Content-Type") == "" {
		h["Content-Type"] = []string{"application/json"}
	}
	if status != http.StatusOK {
		delete(h, "Last-Modified")
	} else {
		if etag == "" {
			etag = ETag(body)
		}
		h["Etag"] = []string{etag}
	}
	if len(vary) > 0 {
		h["Vary"] = []string{strings.Join(vary, ", ")}
	}
	return h
}

// Elements are the headers of the elements of one bulk answer: the work
// of ElementHeader that does not depend on the element, done once per
// answer instead of once per element.
type Elements struct {
	ok, other template // a 200 element's without its ETag; any other status's
}

// template is an element header laid flat, so that each element's copy is
// built without walking a map: keys[i] holds vals[at[i]:at[i+1]] (nil
// where at[i] < 0, as Clone keeps a nil value nil).
type template struct {
	keys []string
	at   []int
	vals []string
}

func flatten(h http.Header) template {
	t := template{keys: make([]string, 0, len(h)), at: make([]int, 0, len(h)+1)}
	for k, vv := range h {
		t.keys = append(t.keys, k)
		if vv == nil {
			t.at = append(t.at, -1)
			continue
		}
		t.at = append(t.at, len(t.vals))
		t.vals = append(t.vals, vv...)
	}
	t.at = append(t.at, len(t.vals))
	return t
}

// NewElements prepares the element headers of a bulk answer whose stored
// header is h (not modified), each with vary as its Vary if not empty.
func NewElements(h http.Header, vary []string) *Elements {
	ok := ElementHeader(h.Clone(), http.StatusOK, nil, vary, `""`)
	delete(ok, "Etag")
	return &Elements{ok: flatten(ok), other: flatten(ElementHeader(h.Clone(), http.StatusNotFound, nil, vary, ""))}
}

// Header is a new header for one element, the same as ElementHeader would
// make for it from the answer's header. Its map is the caller's to change;
// its values are shared by every element's header of the answer and are
// read only, as a stored entry's are (a hit hands them to the response
// writer as they are): each is capped, so an append to one copies it.
func (e *Elements) Header(status int, body []byte, etag string) http.Header {
	return e.HeaderIn(nil, status, body, etag)
}

// Shared is the header of every element of status status but for the
// ETag (none: a 200 element's is the caller's to keep beside it): one new
// map, for the caller to share among the answer's elements once it stops
// changing it.
func (e *Elements) Shared(status int) http.Header {
	if status != http.StatusOK {
		return e.other.with(nil, "", "")
	}
	return e.ok.with(nil, "", "")
}

// HeaderIn is Header with slot[:1] as the backing array of the ETag's
// value when slot has room for it, so that the caller can allocate it
// together with what lives as long (an entry).
func (e *Elements) HeaderIn(slot []string, status int, body []byte, etag string) http.Header {
	if status != http.StatusOK {
		return e.other.with(nil, "", "")
	}
	if etag == "" {
		etag = ETag(body)
	}
	return e.ok.with(slot, "Etag", etag)
}

// with is a new header holding t and the field k: v (none if k is ""),
// in one allocation beside the map (none if slot has room for v): t's
// values are the answer's, shared by every element's header, each slice
// capped so that an append to one never writes into another. Laying them
// out per element cost a copy of each and its room in every entry.
func (t *template) with(slot []string, k, v string) http.Header {
	n := len(t.keys)
	if k != "" {
		n++
	}
	c := make(http.Header, n)
	end := t.at[len(t.keys)]
	for i := len(t.keys) - 1; i >= 0; i-- {
		// Walked backwards: a nil value's end is the next one's start.
		if t.at[i] < 0 {
			c[t.keys[i]] = nil
			continue
		}
		c[t.keys[i]] = t.vals[t.at[i]:end:end]
		end = t.at[i]
	}
	if k != "" {
		if cap(slot) == 0 {
			slot = make([]string, 1)
		}
		slot = slot[:1:1]
		slot[0] = v
		c[k] = slot
	}
	return c
}

// ETag is a strong entity tag for body (RFC 9110 §8.8.3): 96 bits of its
// BLAKE2b-256, so it changes whenever a byte does, as a strong validator
// must (§8.8.1). It is computed for each 200 element of a bulk answer and
// each split list, so its speed is the batched miss's.
//
// The hash is cryptographic and unkeyed on purpose. Unkeyed: every replica
// and every restart must give the same bytes the same tag, or clients'
// If-None-Match stops matching across a fleet (a per-process seed, as
// hash/maphash has, would break that). Cryptographic: an element's bytes
// are often written by its users, who must not be able to make a changed
// element keep its old tag and so keep clients revalidating onto a stale
// copy; 96 bits leave a second preimage out of reach.
//
// BLAKE2b rather than SHA-256: on CPUs without the SHA extensions (SHA-NI),
// such as the Xeons this was measured on, BLAKE2b-256 takes ~1.3 µs for a
// 1 KB element where SHA-256 takes 5.0–5.6 µs (BenchmarkETag). With SHA-NI
// the order flips (SHA-256 ~0.6 µs/KB, BLAKE2b ~1.1), but a fleet must use
// one function whatever its CPUs, and changing it changes every tag (each
// client's next revalidation is a 200 once), so the choice favours the
// CPUs without SHA-NI, where the hash cost most.
func ETag(body []byte) string {
	var b [ETagLen]byte
	etagOf(b[:], body)
	return string(b[:])
}

// ETagLen is the length of an ETag: a quoted 16-character base64 text.
const ETagLen = 2 + 16

func etagOf(b, body []byte) {
	sum := blake2b.Sum256(body)
	b[0] = '"'
	base64.RawURLEncoding.Encode(b[1:17], sum[:12])
	b[17] = '"'
}

// ETagAfter is ETag(elem), written into the ETagLen bytes of elem's
// capacity past its end when it has them (SplitForRoom), and elem capped
// at its length: the tag then lives in the element's own allocation, one
// allocation less per element and no object more for the collector to
// find in a cache of many. The caller gives up those bytes: they are the
// string's, never written again (the capped body cannot reach them).
func ETagAfter(elem []byte) (tag string, body []byte) {
	n := len(elem)
	if cap(elem)-n < ETagLen {
		return ETag(elem), elem
	}
	b := elem[n : n+ETagLen]
	etagOf(b, elem)
	return unsafe.String(&b[0], ETagLen), elem[:n:n]
}

// maxETag bounds an app's per-element validator: longer ones are ignored.
const maxETag = 256

// ElementETag is the app's own validator for one element (batch.etag_field):
// the value of the top-level field name of elem, a compact, valid JSON
// object as Split returns it. A string that is already an entity-tag
// (`"v7"`, `W/"v7"`, RFC 9110 §8.8.3) is used as is; any other string or a
// number v becomes the strong tag "v". ok is false when the field is
// absent, empty, not a string or number, longer than 256 bytes, or holds a
// character an entity-tag cannot (a space, a quote, a control character,
// non-ASCII): the caller then makes its own over the bytes.
func ElementETag(elem []byte, name string) (tag string, ok bool) {
	if len(elem) < 2 || elem[0] != '{' {
		return "", false
	}
	v := field(elem, name)
	var s string
	switch {
	case v == nil:
		return "", false
	case v[0] == '"':
		if json.Unmarshal(v, &s) != nil {
			return "", false
		}
	case v[0] == '-' || '0' <= v[0] && v[0] <= '9':
		s = string(v)
	default:
		return "", false
	}
	if len(s) == 0 || len(s) > maxETag {
		return "", false
	}
	if opaque, _ := strings.CutPrefix(s, "W/"); isOpaqueTag(opaque) {
		return s, true
	}
	if !isETagc(s) {
		return "", false
	}
	return `"` + s + `"`, true
}

// isOpaqueTag reports whether s is a quoted opaque-tag: DQUOTE *etagc DQUOTE.
func isOpaqueTag(s string) bool {
	return len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' && isETagc(s[1:len(s)-1])
}

// isETagc reports whether every byte of s is an etagc (%x21 / %x23-7E; the
// obs-text range is refused, so a tag is plain ASCII).
func isETagc(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c == '"' || c > 0x7e {
			return false
		}
	}
	return true
}
