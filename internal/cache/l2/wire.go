package l2

import (
	"encoding/base64"
	"unicode/utf8"
)

// Tags and keys are bytes: a path like /items/caf%E9 decodes to a tag that
// is not UTF-8, and encoding/json replaces such bytes with U+FFFD, so a
// peer would drop a tag nobody carries and keep serving the old answer.
// Message fields therefore carry strings that are valid UTF-8 as JSON
// strings (which round-trip exactly), and every other one base64-encoded
// in a field of its own (Tags64, Keys64).
//
// Rolling deploys: a replica of the previous release ignores the new
// fields, so until it is replaced it misses only the invalidations of tags
// that are not UTF-8 — which it never received intact before either —
// while every UTF-8 tag reaches it as before. A message from it has no
// new fields and is read as before.

// splitLossless returns ss with the strings that are not valid UTF-8 left
// out, and those strings base64-encoded.
func splitLossless(ss []string) (text, b64 []string) {
	for i, s := range ss {
		if utf8.ValidString(s) {
			continue
		}
		// At least one: copy the valid ones so far, then sort the rest.
		text = append(make([]string, 0, len(ss)), ss[:i]...)
		for _, s := range ss[i:] {
			if utf8.ValidString(s) {
				text = append(text, s)
			} else {
				b64 = append(b64, base64.StdEncoding.EncodeToString([]byte(s)))
			}
		}
		return text, b64
	}
	return ss, nil
}

// joinLossless appends the decoded b64 strings to text; one that does not
// decode is left out (a malformed message drops nothing it cannot name).
func joinLossless(text, b64 []string) []string {
	for _, s := range b64 {
		if b, err := base64.StdEncoding.DecodeString(s); err == nil {
			text = append(text, string(b))
		}
	}
	return text
}

// encodeWire is inv as it goes on the channel.
func encodeWire(inv Invalidation) Invalidation {
	inv.Tags, inv.Tags64 = splitLossless(inv.Tags)
	inv.Keys, inv.Keys64 = splitLossless(inv.Keys)
	return inv
}

// decodeWire is inv as it came off the channel, its tags and keys whole.
func decodeWire(inv Invalidation) Invalidation {
	inv.Tags, inv.Tags64 = joinLossless(inv.Tags, inv.Tags64), nil
	inv.Keys, inv.Keys64 = joinLossless(inv.Keys, inv.Keys64), nil
	return inv
}
