package cachekey

import (
	"net/http"
	"net/textproto"
	"slices"
	"strings"

	"github.com/sidecache/sidecache/internal/httpcache"
)

// WithVary returns the secondary key of a response that carried Vary:
// names (RFC 9111 §4.1): key followed by " |name=value" for each named
// request header, or " |name" when the request lacks it; credentials are
// hashed as in Build. names should come from ParseVary.
//
// Accept-Encoding is not keyed on what the client sent but on one coding
// (" |accept-encoding=gzip"): the one the variant is stored in, or, to
// look one up, the one VariantCoding chooses for the request. Six
// spellings of "gzip is fine" then share one variant, as Varnish and
// Fastly normalise, and the variants per key are at most four (identity,
// gzip, br, zstd) whatever clients send.
func WithVary(key string, names []string, h http.Header, coding string) string {
	if len(names) == 0 {
		return key
	}
	var scratch [512]byte
	b := append(scratch[:0], key...)
	for _, n := range names {
		b = append(b, " |"...)
		if canon := textproto.CanonicalMIMEHeaderKey(n); canon == "Accept-Encoding" {
			b = append(b, "accept-encoding="...)
			b = appendValue(b, coding)
		} else {
			b = appendHeader(b, canon, h)
		}
	}
	return string(b)
}

// Codings is a set of the content-codings a variant may be stored in
// besides identity: gzip, br and zstd (the ones every current browser and
// HTTP library can decode; deflate's two readings make it a poor one to
// share). The proxy keeps, per route, the set its origin has answered
// with.
type Codings uint8

// variantCodings are the bits of Codings.
const variantCodings = codingBr | codingGzip | codingZstd

// Identity is the coding of an uncompressed variant, which every client
// that accepts identity may be served.
const Identity = "identity"

// With adds coding (as StoredCoding names it) to s.
func (s Codings) With(coding string) Codings {
	return s | Codings(codingBit(coding)&variantCodings)
}

// VariantCoding is the coding of the variant a request whose
// Accept-Encoding field lines are vals should be served, among the codings
// the origin has used: the best one the client accepts (zstd, then br,
// then gzip, for size), or identity. A stored identity variant answers
// every client (RFC 9110 §12.5.3: identity is always acceptable unless
// refused, which the sidecar does not honour, as NGINX and Go do not).
func VariantCoding(vals []string, used Codings) string {
	m := acceptEncodingMask(vals) & uint8(used)
	switch {
	case m&codingZstd != 0:
		return "zstd"
	case m&codingBr != 0:
		return "br"
	case m&codingGzip != 0:
		return "gzip"
	}
	return Identity
}

// StoredCoding names the coding of an answer whose Content-Encoding is ce
// as a variant key holds it: identity, gzip, br or zstd. ok is false for
// any other coding, or a chain of several, which no variant names: such an
// answer is not stored as a shared variant.
func StoredCoding(ce string) (coding string, ok bool) {
	ce = trimOWS(ce)
	switch {
	case ce == "" || strings.EqualFold(ce, Identity):
		return Identity, true
	case strings.ContainsRune(ce, ','):
		return "", false
	}
	switch codingBit(ce) {
	case codingGzip:
		return "gzip", true
	case codingBr:
		return "br", true
	case codingZstd:
		return "zstd", true
	}
	return "", false
}

// CodingOf is StoredCoding of the coding an answer with header h is in,
// all its Content-Encoding lines read as one list (httpcache.ContentCoding):
// `Content-Encoding: identity` then `Content-Encoding: gzip` is gzip, and
// two codings are a chain, never stored.
func CodingOf(h http.Header) (coding string, ok bool) {
	return StoredCoding(httpcache.ContentCoding(h))
}

// ForwardAcceptEncoding is the Accept-Encoding the sidecar sends upstream
// for a client whose field lines are vals: the codings a variant may be
// stored in (br, gzip, zstd) that the client accepts, sorted, or identity.
// The origin then never answers in a coding no variant can hold.
func ForwardAcceptEncoding(vals []string) string {
	return encodingSets[acceptEncodingMask(vals)&variantCodings]
}

// ParseVary returns the header names a response varies on (RFC 9110
// §12.5.5), canonicalised, deduplicated and sorted so that the variant key
// does not depend on how the upstream spelt them. star reports "Vary: *",
// which no later request can match (RFC 9111 §4.1); names is then nil.
//
// An element that is no field name (a token, RFC 9110 §5.6.2) names
// each of its words: "Accept-Language X-Tenant", "Accept-Encoding;X-Tenant"
// or "X-Tenant;" is an app's list spelt with the wrong separator. Keyed
// as the one name it spells, a header no request carries, it made one
// variant of every tenant's answer (with forward_headers: all, the
// upstream saw each tenant's header), and the route never learned to
// forward the headers it names. Varnish refuses such an answer ("Malformed
// Vary header", a pass); keyed on every header it may name, it is stored
// only as the variant each selects: strict for storage, without the pass.
func ParseVary(h http.Header) (names []string, star bool) {
	for _, line := range h["Vary"] {
		for line != "" {
			var el string
			el, line, _ = strings.Cut(line, ",")
			el = textproto.TrimString(el)
			switch {
			case el == "":
			case el == "*":
				star = true
			case !isToken(el):
				for el != "" {
					var w string
					w, el = nextWord(el)
					if w == "*" {
						star = true
					} else if w != "" {
						names = append(names, textproto.CanonicalMIMEHeaderKey(w))
					}
				}
			default:
				names = append(names, textproto.CanonicalMIMEHeaderKey(el))
			}
		}
	}
	if star {
		return nil, true
	}
	slices.Sort(names)
	return slices.Compact(names), false
}

// Content-codings a variant key distinguishes. A closed set bounds the
// variants per key whatever clients send.
const (
	codingStar uint8 = 1 << iota
	codingBr
	codingDeflate
	codingGzip
	codingZstd

	codingsKnown = codingBr | codingDeflate | codingGzip | codingZstd
)

// encodingSets spells every mask, members in sorted order.
var encodingSets = [32]string{
	"identity", "*", "br", "*,br", "deflate", "*,deflate", "br,deflate", "*,br,deflate",
	"gzip", "*,gzip", "br,gzip", "*,br,gzip", "deflate,gzip", "*,deflate,gzip", "br,deflate,gzip", "*,br,deflate,gzip",
	"zstd", "*,zstd", "br,zstd", "*,br,zstd", "deflate,zstd", "*,deflate,zstd", "br,deflate,zstd", "*,br,deflate,zstd",
	"gzip,zstd", "*,gzip,zstd", "br,gzip,zstd", "*,br,gzip,zstd", "deflate,gzip,zstd", "*,deflate,gzip,zstd", "br,deflate,gzip,zstd", "*,br,deflate,gzip,zstd",
}

// NormalizeAcceptEncoding reduces an Accept-Encoding value (RFC 9110
// §12.5.3) to the sorted set of codings it accepts among br, deflate, gzip
// and zstd, joined by ",", or "identity" when it accepts none of them
// (also for an absent or empty header, so a client that asked for nothing
// never gets a compressed body).
//
// Names are matched case-insensitively, x-gzip is gzip, and a coding is
// accepted only with q>0 and no other element refusing it; an invalid
// qvalue refuses. "*" accepts every coding not refused: the result then
// lists each known coding "*" admits, plus "*" itself unless some unknown
// coding was refused (the set cannot name it, so "*" would admit too much).
func NormalizeAcceptEncoding(v string) string {
	return encodingSets[finishMask(scanAccept(0, 0, false, v))]
}

// AcceptsEncoding reports whether a response with the given Content-Encoding
// (a list of codings, in the order applied) may be served to every client
// whose Accept-Encoding normalises to normalized. The proxy checks it
// before storing or serving a body, because an upstream may pick a coding
// outside the set the variant names.
func AcceptsEncoding(normalized, contentEncoding string) bool {
	var have uint8
	for s := normalized; s != ""; {
		var el string
		el, s, _ = strings.Cut(s, ",")
		have |= codingBit(el)
	}
	for s := contentEncoding; s != ""; {
		var c string
		c, s, _ = strings.Cut(s, ",")
		c = trimOWS(c)
		if c == "" || strings.EqualFold(c, "identity") {
			continue
		}
		if bit := codingBit(c); bit&codingsKnown != 0 {
			if have&bit == 0 {
				return false
			}
		} else if have&codingStar == 0 {
			return false
		}
	}
	return true
}

// AcceptsStored guards against an upstream that compresses without saying
// Vary: a stored response (header stored) in a content-coding the client
// (request header req) did not accept is never served to it (RFC 9110
// §12.5.3).
//
// Both fields are read whole, every field line (RFC 9110 §5.3): the first
// line of a stored `Content-Encoding: identity`, `Content-Encoding: gzip`
// said identity to every client.
func AcceptsStored(req, stored http.Header) bool {
	ce := httpcache.ContentCoding(stored)
	if ce == "" {
		return true
	}
	return AcceptsEncoding(encodingSets[acceptEncodingMask(req["Accept-Encoding"])], ce)
}

func acceptEncodingMask(vals []string) uint8 {
	var acc, rej uint8
	var unknownRefused bool
	for _, v := range vals {
		acc, rej, unknownRefused = scanAccept(acc, rej, unknownRefused, v)
	}
	return finishMask(acc, rej, unknownRefused)
}

func finishMask(acc, rej uint8, unknownRefused bool) uint8 {
	m := acc &^ rej
	if m&codingStar != 0 {
		m |= codingsKnown &^ rej
		if unknownRefused {
			m &^= codingStar
		}
	}
	return m
}

func scanAccept(acc, rej uint8, unknownRefused bool, v string) (uint8, uint8, bool) {
	for v != "" {
		var el string
		el, v, _ = strings.Cut(v, ",")
		coding, params, _ := strings.Cut(el, ";")
		coding = trimOWS(coding)
		if coding == "" {
			continue
		}
		ok := weightPositive(params)
		switch bit := codingBit(coding); {
		case bit == 0:
			if !ok && !strings.EqualFold(coding, "identity") {
				unknownRefused = true
			}
		case ok:
			acc |= bit
		default:
			rej |= bit
		}
	}
	return acc, rej, unknownRefused
}

func codingBit(c string) uint8 {
	switch {
	case c == "*":
		return codingStar
	case strings.EqualFold(c, "gzip"), strings.EqualFold(c, "x-gzip"):
		return codingGzip
	case strings.EqualFold(c, "br"):
		return codingBr
	case strings.EqualFold(c, "deflate"):
		return codingDeflate
	case strings.EqualFold(c, "zstd"):
		return codingZstd
	}
	return 0
}

// weightPositive reports whether the parameters of one element carry a
// weight above zero; no weight means q=1 (RFC 9110 §12.4.2).
func weightPositive(params string) bool {
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		name, val, _ := strings.Cut(p, "=")
		if strings.EqualFold(trimOWS(name), "q") {
			return qPositive(trimOWS(val))
		}
	}
	return true
}

// qPositive parses qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
// and reports whether it is valid and above zero.
func qPositive(q string) bool {
	if q == "" || (q[0] != '0' && q[0] != '1') {
		return false
	}
	frac := q[1:]
	if frac != "" {
		if frac[0] != '.' || len(frac) > 4 {
			return false
		}
		frac = frac[1:]
	}
	nonzero := false
	for i := 0; i < len(frac); i++ {
		switch c := frac[i]; {
		case c == '0':
		case '1' <= c && c <= '9' && q[0] == '0':
			nonzero = true
		default:
			return false
		}
	}
	return q[0] == '1' || nonzero
}

// trimOWS strips optional whitespace, SP and HTAB only (RFC 9110 §5.6.3).
func trimOWS(s string) string {
	return strings.Trim(s, " \t")
}

// AnswerVary is the request headers an upstream answer varies on: its
// Vary (ParseVary), and Accept-Encoding when it is compressed without
// saying so — it is then kept as the variant it is (RFC 9110 §12.5.3), so
// that clients who did not accept that coding never receive it. star:
// Vary: *.
func AnswerVary(upstream http.Header) (names []string, star bool) {
	names, star = ParseVary(upstream)
	if httpcache.ContentCoding(upstream) != "" && !slices.Contains(names, "Accept-Encoding") {
		names = append(names, "Accept-Encoding")
		slices.Sort(names)
	}
	return names, star
}

// nextWord returns the first run of tchar in s, past any other bytes,
// and what follows it.
func nextWord(s string) (word, rest string) {
	i := 0
	for i < len(s) && !isTchar(s[i]) {
		i++
	}
	j := i
	for j < len(s) && isTchar(s[j]) {
		j++
	}
	return s[i:j], s[j:]
}

// isToken reports whether s is a token (RFC 9110 §5.6.2), as a field
// name is (§5.1).
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) {
			return false
		}
	}
	return s != ""
}
