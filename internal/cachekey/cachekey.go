// Package cachekey builds the strings under which responses are stored.
//
// A key must be injective over canonical requests: two requests that differ
// in a component the route puts in the key never share a key, and requests
// that differ only in spelling (the order of differently named query
// parameters, percent-encoding of unreserved characters, hex and host case:
// RFC 3986 §6.2.2) always do. Nothing else is merged: the values of a
// repeated parameter keep their order, and a reserved character is not its
// percent-encoding. Keys stay human-readable because
// operators see them in logs and purge by them:
//
//	GET example.com/clients/1?fields=a accept-language=en
//
// The grammar is method SP host path ["?" query] *(SP header) *(" |" vary).
// Every component is escaped so that it cannot contain the byte that ends
// it: the method no SP, the host no "/" or "*", the path no "?" or SP, the
// query and header values no SP, "&", "=" or "|".
//
// Build sits on the cache-hit path, so it parses the query itself, keeps
// its scratch space on the stack and allocates only the returned string.
package cachekey

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
)

// Options chooses the request parts beyond method, host and path that
// select a response.
type Options struct {
	// Query lists the query parameters in the key, by exact name.
	Query []string `json:"query,omitempty"`
	// AllQuery puts every query parameter in the key and overrides Query.
	AllQuery bool `json:"all_query,omitempty"`
	// Headers lists request headers whose values join the key, in this
	// order (route.Compile sorts and canonicalises them).
	Headers []string `json:"headers,omitempty"`
}

// Build returns the key of r under o; a nil o keys on method, host and path
// only. HEAD shares GET's key because a HEAD is answered from the stored
// GET response (RFC 9110 §9.3.2).
func Build(r *http.Request, o *Options) string {
	var scratch [512]byte
	b := scratch[:0]

	m := r.Method
	if m == "" || m == http.MethodHead {
		m = http.MethodGet
	}
	b = appendMethod(b, m)
	b = append(b, ' ')

	host := r.Host
	if host == "" && r.URL != nil {
		host = r.URL.Host
	}
	b = appendHost(b, host)

	if r.URL == nil {
		b = append(b, '/')
	} else {
		b = appendPath(b, r.URL)
	}
	if o == nil {
		return string(b)
	}
	if r.URL != nil && (o.AllQuery || len(o.Query) > 0) {
		b = appendQuery(b, r.URL.RawQuery, o)
	}
	for _, name := range o.Headers {
		b = append(b, ' ')
		b = appendHeader(b, textproto.CanonicalMIMEHeaderKey(name), r.Header)
	}
	return string(b)
}

// appendMethod writes the method; bytes outside tchar (RFC 9110 §5.6.2)
// and "%" are escaped so the method always ends at the first space.
func appendMethod(b []byte, m string) []byte {
	for i := 0; i < len(m); i++ {
		if c := m[i]; isTchar(c) && c != '%' {
			b = append(b, c)
		} else {
			b = appendPct(b, c)
		}
	}
	return b
}

// appendHost writes the host lowercased (RFC 3986 §6.2.2.1). Only the
// bytes of a DNS name, an IP literal and a port stay literal, so the host
// ends at the path's "/" (or "*").
func appendHost(b []byte, h string) []byte {
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case 'A' <= c && c <= 'Z':
			b = append(b, c+'a'-'A')
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9',
			c == '-', c == '.', c == '_', c == '~', c == ':', c == '[', c == ']':
			b = append(b, c)
		default:
			b = appendPct(b, c)
		}
	}
	return b
}

// appendPath writes the request path in the normal form of RFC 3986
// §6.2.2: the escaped form the client sent (net/url's EscapedPath), with
// percent-encoded unreserved bytes decoded and hex digits in upper case.
// Encoded reserved bytes stay encoded: "/a%2Fb" is not "/a/b".
//
// The path always starts with "/": the empty path is "/" (RFC 9110 §4.2.3),
// the asterisk form stays "*", and a relative path (never seen from the
// wire) is rooted.
func appendPath(b []byte, u *url.URL) []byte {
	p := u.Path
	switch {
	case p == "*":
		return append(b, '*')
	case p == "" || p[0] != '/':
		b = append(b, '/')
	}
	if raw := u.RawPath; raw != "" && validRawPath(raw, p) {
		for i := 0; i < len(raw); {
			if raw[i] == '%' {
				c := unhex(raw[i+1])<<4 | unhex(raw[i+2])
				if isUnreserved(c) {
					b = append(b, c)
				} else {
					b = appendPct(b, c)
				}
				i += 3
				continue
			}
			b = append(b, raw[i])
			i++
		}
		return b
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; pathEscapes(c) {
			b = appendPct(b, c)
		} else {
			b = append(b, c)
		}
	}
	return b
}

// validRawPath reports whether raw is a valid encoding of path, the test
// net/url's EscapedPath applies, done without allocating.
func validRawPath(raw, path string) bool {
	j := 0
	for i := 0; i < len(raw); {
		c := raw[i]
		switch c {
		case '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=', ':', '@', '[', ']':
			i++
		case '%':
			if i+2 >= len(raw) || !isHex(raw[i+1]) || !isHex(raw[i+2]) {
				return false
			}
			c = unhex(raw[i+1])<<4 | unhex(raw[i+2])
			i += 3
		default:
			if pathEscapes(c) {
				return false
			}
			i++
		}
		if j >= len(path) || path[j] != c {
			return false
		}
		j++
	}
	return j == len(path)
}

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

// appendValue writes a plain string (a header name or value) encoded.
func appendValue(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		b = appendValueByte(b, s[i])
	}
	return b
}

func appendValueByte(b []byte, c byte) []byte {
	if isValueLiteral(c) {
		return append(b, c)
	}
	return appendPct(b, c)
}

// appendHeader writes "name" for an absent field and "name=value" for a
// present one: RFC 9111 §4.1 keeps an absent field apart from an empty one.
// Field lines join with "," (RFC 9110 §5.3). Accept-Encoding is normalised;
// credentials are hashed so keys in logs and the admin API leak no secret.
func appendHeader(b []byte, canon string, h http.Header) []byte {
	for i := 0; i < len(canon); i++ {
		c := canon[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = appendValueByte(b, c)
	}
	vals := h[canon]
	if canon == "Accept-Encoding" {
		b = append(b, '=')
		return append(b, encodingSets[acceptEncodingMask(vals)]...)
	}
	if len(vals) == 0 {
		return b
	}
	b = append(b, '=')
	if isCredential(canon) {
		return appendDigest(b, vals)
	}
	for i, v := range vals {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendValue(b, textproto.TrimString(v))
	}
	return b
}

func isCredential(canon string) bool {
	switch canon {
	case "Authorization", "Proxy-Authorization", "Cookie":
		return true
	}
	return false
}

// appendDigest writes "sha256:" and 128 bits of the hash of the joined
// field value: enough that no two users' credentials share a key.
func appendDigest(b []byte, vals []string) []byte {
	var scratch [256]byte
	v := scratch[:0]
	for i, s := range vals {
		if i > 0 {
			v = append(v, ',')
		}
		v = append(v, textproto.TrimString(s)...)
	}
	sum := sha256.Sum256(v)
	b = append(b, "sha256:"...)
	return hex.AppendEncode(b, sum[:16])
}

const hexdigits = "0123456789ABCDEF"

func appendPct(b []byte, c byte) []byte {
	return append(b, '%', hexdigits[c>>4], hexdigits[c&15])
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// isUnreserved is RFC 3986 §2.3.
func isUnreserved(c byte) bool {
	return isAlnum(c) || c == '-' || c == '.' || c == '_' || c == '~'
}

// isTchar is RFC 9110 §5.6.2.
func isTchar(c byte) bool {
	return isAlnum(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// pathEscapes matches net/url's shouldEscape in path mode, so that a path
// without RawPath is written exactly as EscapedPath would write it.
func pathEscapes(c byte) bool {
	return !isUnreserved(c) && strings.IndexByte("$&+,/:;=@", c) < 0
}

// isValueLiteral keeps header text readable while escaping the
// key's separators (SP & = |), "%" and "+", and everything not printable.
func isValueLiteral(c byte) bool {
	return isUnreserved(c) || strings.IndexByte("!$'()*,/:;@", c) >= 0
}
