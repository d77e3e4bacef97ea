package bulk

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
)

// representation are the fields of a bulk answer that describe the bytes
// of the whole array, not of one element (RFC 9110 §8: representation
// metadata and validators), and Set-Cookie, which was minted for the
// client whose request opened the batch. An element never carries them.
var representation = [...]string{
	"Content-Length", "Content-Encoding", "Content-Range", "Content-Location",
	"Etag", "Digest", "Content-Digest", "Repr-Digest", "Content-Md5", "Vary", "Set-Cookie",
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
// make for it from the answer's header. It is the caller's to change: no
// two elements' headers share a map or a value's backing array.
func (e *Elements) Header(status int, body []byte, etag string) http.Header {
	return e.HeaderIn(nil, status, body, etag)
}

// HeaderIn is Header with vals as the backing array of the header's values
// when it has room for them all (Values), so that the caller can allocate
// it together with what lives as long (an entry).
func (e *Elements) HeaderIn(vals []string, status int, body []byte, etag string) http.Header {
	if status != http.StatusOK {
		return e.other.with(vals, "", "")
	}
	if etag == "" {
		etag = ETag(body)
	}
	return e.ok.with(vals, "Etag", etag)
}

// Values is the most values an element's header holds: the capacity vals
// needs for HeaderIn to use it.
func (e *Elements) Values() int { return max(len(e.ok.vals), len(e.other.vals)) + 1 }

// with is a new header holding t and the field k: v (none if k is ""), in
// two allocations beside the map: every value shares one backing array
// (vals if it has room, a new one otherwise), each slice capped so that an
// append to one never writes into another.
func (t *template) with(vals []string, k, v string) http.Header {
	n := len(t.keys)
	var sv []string
	if need := len(t.vals) + 1; cap(vals) >= need {
		sv = vals[:len(t.vals):need]
	} else {
		sv = make([]string, len(t.vals), need)
	}
	copy(sv, t.vals)
	if k != "" {
		sv = append(sv, v)
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
		c[t.keys[i]] = sv[t.at[i]:end:end]
		end = t.at[i]
	}
	if k != "" {
		c[k] = sv[len(sv)-1:]
	}
	return c
}

// ETag is a strong entity tag for body (RFC 9110 §8.8.3): 96 bits of its
// SHA-256, so it changes whenever a byte does, as a strong validator must.
func ETag(body []byte) string {
	sum := sha256.Sum256(body)
	var b [2 + 16]byte
	b[0] = '"'
	base64.RawURLEncoding.Encode(b[1:17], sum[:12])
	b[17] = '"'
	return string(b[:])
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
