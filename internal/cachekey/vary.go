package cachekey

import (
	"net/http"
	"net/textproto"
	"slices"
	"strings"
)

// WithVary returns the secondary key of a response that carried Vary:
// names (RFC 9111 §4.1): key followed by " |name=value" for each named
// request header, or " |name" when the request lacks it. Accept-Encoding
// is normalised so that equivalent headers share a variant; credentials
// are hashed as in Build. names should come from ParseVary.
func WithVary(key string, names []string, h http.Header) string {
	if len(names) == 0 {
		return key
	}
	var scratch [512]byte
	b := append(scratch[:0], key...)
	for _, n := range names {
		b = append(b, " |"...)
		b = appendHeader(b, textproto.CanonicalMIMEHeaderKey(n), h)
	}
	return string(b)
}

// ParseVary returns the header names a response varies on (RFC 9110
// §12.5.5), canonicalised, deduplicated and sorted so that the variant key
// does not depend on how the upstream spelt them. star reports "Vary: *",
// which no later request can match (RFC 9111 §4.1); names is then nil.
func ParseVary(h http.Header) (names []string, star bool) {
	for _, line := range h["Vary"] {
		for line != "" {
			var el string
			el, line, _ = strings.Cut(line, ",")
			el = textproto.TrimString(el)
			switch el {
			case "":
			case "*":
				star = true
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
func AcceptsStored(req, stored http.Header) bool {
	ce := stored.Get("Content-Encoding")
	if ce == "" {
		return true
	}
	return AcceptsEncoding(NormalizeAcceptEncoding(req.Get("Accept-Encoding")), ce)
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
