package cachekey

import (
	"slices"
	"strings"
)

// The query part of a key: RFC 3986 §6.2.2 normal form, parameters sorted
// by name only, and the query the cached path forwards (ForwardQuery).

// pair is one query parameter, still percent-encoded.
type pair struct{ k, v string }

// appendQuery writes the chosen query parameters in the normal form of RFC
// 3986 §6.2.2, sorted by name only: a stable sort, so the values of a
// repeated parameter keep the order the client gave them ("lang=fr&lang=en"
// asks for something else than "lang=en&lang=fr" of an upstream that takes
// the first one). Parameters with distinct names are reordered because
// every application framework reads them as a map. Empty "&&" segments drop
// out; "a" equals "a=".
//
// Each component is written token by token (see queryToken): only the
// percent-encodings of unreserved bytes are decoded (§6.2.2.2); a reserved
// byte and its percent-encoding stay apart (§2.2: "a=1;b=2" is not
// "a=1%3Bb=2", and "+" is neither "%2B" nor "%20": the form-encoding reading
// of "+" as a space is the application's, not the URI's), and an invalid escape
// ("%zz") stays verbatim, apart from "%25zz": an upstream may refuse the
// one and decode the other.
func appendQuery(b []byte, raw string, o *Options) []byte {
	var scratch [16]pair
	ps := scratch[:0]
	for raw != "" {
		var seg string
		seg, raw, _ = strings.Cut(raw, "&")
		if seg == "" {
			continue
		}
		k, v, _ := strings.Cut(seg, "=")
		if o.AllQuery || chosen(o.Query, k) {
			ps = append(ps, pair{k, v})
		}
	}
	if len(ps) == 0 {
		return b
	}
	slices.SortStableFunc(ps, func(x, y pair) int { return compareTokens(x.k, y.k) })
	b = append(b, '?')
	for i, p := range ps {
		if i > 0 {
			b = append(b, '&')
		}
		b = appendComponent(b, p.k)
		b = append(b, '=')
		b = appendComponent(b, p.v)
	}
	return b
}

// ForwardQuery is raw with only the parameters o puts in the key, each as
// the client spelt it and in the client's order: what the upstream is sent
// on the cached path, so that a parameter the key does not hold cannot
// shape an answer stored for everyone (a JSONP "callback", a debug flag).
// It returns raw itself when every parameter is kept, so the common case
// allocates nothing.
func ForwardQuery(raw string, o *Options) string {
	if o == nil || o.AllQuery {
		return raw
	}
	keep := 0
	all := true
	for s := raw; s != ""; {
		var seg string
		seg, s, _ = strings.Cut(s, "&")
		if seg == "" {
			all = false
			continue
		}
		k, _, _ := strings.Cut(seg, "=")
		if chosen(o.Query, k) {
			keep++
		} else {
			all = false
		}
	}
	if all {
		return raw
	}
	if keep == 0 {
		return ""
	}
	out := make([]byte, 0, len(raw))
	for s := raw; s != ""; {
		var seg string
		seg, s, _ = strings.Cut(s, "&")
		if seg == "" {
			continue
		}
		if k, _, _ := strings.Cut(seg, "="); chosen(o.Query, k) {
			if len(out) > 0 {
				out = append(out, '&')
			}
			out = append(out, seg...)
		}
	}
	return string(out)
}

// chosen reports whether the raw (encoded) parameter name is one of names.
// The match is lenient, on the decoded name ("f%69elds" and "fields" are
// both the parameter "fields" to every framework), so that whatever the
// upstream would read as a keyed parameter is kept and forwarded; the key
// then holds the name's normal form, spelling differences included.
func chosen(names []string, rawKey string) bool {
	for _, n := range names {
		if equalDecoded(rawKey, n) {
			return true
		}
	}
	return false
}

// decodeAt returns the byte a query string spells at s[i] and the index of
// the next one, decoding as application/x-www-form-urlencoded does ("+" is
// a space) and leniently (a "%" without two hex digits is a literal "%",
// as in the WHATWG URL standard). Only parameter names are matched this
// way; the key itself is written by queryToken.
func decodeAt(s string, i int) (byte, int) {
	switch c := s[i]; c {
	case '+':
		return ' ', i + 1
	case '%':
		if i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			return unhex(s[i+1])<<4 | unhex(s[i+2]), i + 3
		}
		return c, i + 1
	default:
		return c, i + 1
	}
}

// Token classes of a query component's normal form (queryToken).
const (
	tokLiteral = 0      // the byte itself
	tokEscaped = 1 << 8 // "%XX": a percent-encoded byte (or one outside the URI grammar)
	tokRaw     = 2 << 8 // "%_XX": a raw delimiter the key cannot hold literally, or an invalid "%"
)

// queryToken reads one token of the query component s at i and returns it
// with the index of the next one. Two components are equivalent under RFC
// 3986 §6.2.2 exactly when their token sequences are equal:
//
//   - an unreserved byte, raw or percent-encoded, is itself (§6.2.2.2);
//   - another percent-encoded byte is tokEscaped, hex case aside (§6.2.2.1);
//   - a raw sub-delim or ":", "@", "/", "?" is itself, apart from its
//     encoding (§2.2) — "+" is not "%20" — except "=", which the key's
//     grammar cannot hold in a value: tokRaw;
//   - a "%" that starts no valid escape is tokRaw;
//   - a byte outside the URI grammar (space, "|", non-ASCII…), which a
//     lenient server let through ("[" and "]" included, which §3.4 leaves
//     out of a query), is tokEscaped: the same as its percent-encoding,
//     the mapping of RFC 3987 §3.1.
func queryToken(s string, i int) (uint16, int) {
	c := s[i]
	switch {
	case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
		d := unhex(s[i+1])<<4 | unhex(s[i+2])
		if isUnreserved(d) {
			return tokLiteral | uint16(d), i + 3
		}
		return tokEscaped | uint16(d), i + 3
	case c == '%', c == '=':
		return tokRaw | uint16(c), i + 1
	case isUnreserved(c), strings.IndexByte("!$'()*+,/:;@?", c) >= 0:
		return tokLiteral | uint16(c), i + 1
	default:
		return tokEscaped | uint16(c), i + 1
	}
}

// compareTokens orders two query components by their token sequences; 0
// means equivalent.
func compareTokens(x, y string) int {
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		var a, b uint16
		a, i = queryToken(x, i)
		b, j = queryToken(y, j)
		if a != b {
			if a < b {
				return -1
			}
			return 1
		}
	}
	switch {
	case i < len(x):
		return 1
	case j < len(y):
		return -1
	}
	return 0
}

// equalDecoded reports whether the encoded raw spells plain.
func equalDecoded(raw, plain string) bool {
	i, j := 0, 0
	for i < len(raw) {
		if j >= len(plain) {
			return false
		}
		var c byte
		c, i = decodeAt(raw, i)
		if c != plain[j] {
			return false
		}
		j++
	}
	return j == len(plain)
}

// appendComponent writes the query component s in its normal form, one
// token at a time: a literal byte as itself (it is never one of the key's
// separators SP & = |, nor "%"), tokEscaped as "%XX" and tokRaw as "%_XX"
// (so "%zz" is written "%_25zz" and "%25zz" "%25zz").
// No token's spelling is a prefix of another's, so the form is injective.
func appendComponent(b []byte, s string) []byte {
	for i := 0; i < len(s); {
		var t uint16
		t, i = queryToken(s, i)
		switch t &^ 0xff {
		case tokLiteral:
			b = append(b, byte(t))
		case tokEscaped:
			b = appendPct(b, byte(t))
		default:
			b = append(b, '%', '_', hexdigits[byte(t)>>4], hexdigits[byte(t)&15])
		}
	}
	return b
}
