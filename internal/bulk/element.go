package bulk

import (
	"crypto/sha256"
	"encoding/base64"
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
// vary, if not empty, becomes the element's Vary. A 200 element gets a
// strong ETag over its bytes (ETag), so clients can revalidate it and get
// 304s. h is modified and returned.
func ElementHeader(h http.Header, status int, body []byte, vary []string) http.Header {
	for _, k := range representation {
		delete(h, k)
	}
	if status != http.StatusOK || h.Get("Content-Type") == "" {
		h["Content-Type"] = []string{"application/json"}
	}
	if status != http.StatusOK {
		delete(h, "Last-Modified")
	} else {
		h["Etag"] = []string{ETag(body)}
	}
	if len(vary) > 0 {
		h["Vary"] = []string{strings.Join(vary, ", ")}
	}
	return h
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
