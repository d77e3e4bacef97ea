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
	// Host, when set, is the host every request is keyed under instead of
	// its own: one service reached as svc, svc.ns and
	// svc.ns.svc.cluster.local shares one entry (key.host: <name>).
	Host string `json:"-"`
	// NoHost keys on no host at all (key.host: none); Host is then unused.
	NoHost bool `json:"-"`
	// HeadApart keys a HEAD under its own method rather than GET's: set
	// by route.Compile for a route that takes HEAD but not GET. Its
	// HEADs are answered from entries it stored, with its own TTL and
	// tags, which a route taking the path's GETs (the next match) never
	// reads; under one key the two routes' fills overwrote each other,
	// and a GET and a HEAD in turn never hit.
	HeadApart bool `json:"-"`
}

// KeyHost is the host a request with Host header host is keyed under by o
// ("" for NoHost). The proxy sends the upstream this host (as
// X-Forwarded-Host) on the cached path, so the key holds what the upstream
// saw.
func (o *Options) KeyHost(host string) string {
	switch {
	case o == nil:
		return host
	case o.NoHost:
		return ""
	case o.Host != "":
		return o.Host
	}
	return host
}

// Build returns the key of r under o; a nil o keys on method, host and path
// only. HEAD shares GET's key because a HEAD is answered from the stored
// GET response (RFC 9110 §9.3.2), but on a route of HEAD without GET
// (Options.HeadApart).
func Build(r *http.Request, o *Options) string {
	var scratch [512]byte
	b := appendHead(scratch[:0], r, o)
	if r.URL == nil {
		b = append(b, '/')
	} else {
		b = appendPath(b, r.URL)
	}
	return string(appendTail(b, r, o))
}

// Frame is the key of a request split around its path, for the keys of
// requests that differ from it in their URL's path alone (a bulk
// answer's elements, one per id): Key writes only the path of each, not
// again the method, host, query and headers the requests share.
type Frame struct{ head, tail string }

// NewFrame is the frame of r's key under o (Build).
func NewFrame(r *http.Request, o *Options) Frame {
	return Frame{head: string(appendHead(nil, r, o)), tail: string(appendTail(nil, r, o))}
}

// Key is Build(r2, o) for a request r2 that is the frame's but for its
// URL's path: u is r2.URL.
func (f *Frame) Key(u *url.URL) string {
	var scratch [512]byte
	b := append(scratch[:0], f.head...)
	b = appendPath(b, u)
	return string(append(b, f.tail...))
}

// AppendKey appends Key(u) to b.
func (f *Frame) AppendKey(b []byte, u *url.URL) []byte {
	b = append(b, f.head...)
	b = appendPath(b, u)
	return append(b, f.tail...)
}

// appendHead writes the key's method and host (Build).
func appendHead(b []byte, r *http.Request, o *Options) []byte {
	m := r.Method
	if m == "" || m == http.MethodHead && (o == nil || !o.HeadApart) {
		m = http.MethodGet
	}
	b = appendMethod(b, m)
	b = append(b, ' ')

	host := r.Host
	if host == "" && r.URL != nil {
		host = r.URL.Host
	}
	return appendHost(b, o.KeyHost(host))
}

// appendTail writes what the key holds past the path: the query and
// the headers o names (Build).
func appendTail(b []byte, r *http.Request, o *Options) []byte {
	if o == nil {
		return b
	}
	if r.URL != nil && (o.AllQuery || len(o.Query) > 0) {
		b = appendQuery(b, r.URL.RawQuery, o)
	}
	for _, name := range o.Headers {
		b = append(b, ' ')
		b = appendHeader(b, textproto.CanonicalMIMEHeaderKey(name), r.Header)
	}
	return b
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
