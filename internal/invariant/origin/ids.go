package origin

import (
	"math"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Resource is the origin's name for a request path: what it would answer
// for. "" when the path names no resource.
func Resource(path string) string {
	var segs []string
	for _, s := range strings.Split(path, "/") {
		if i := strings.IndexByte(s, ';'); i >= 0 {
			s = s[:i]
		}
		switch decodeUnreserved(s) {
		case "", ".":
			continue
		case "..":
			if len(segs) > 0 {
				segs = segs[:len(segs)-1]
			}
			continue
		}
		segs = append(segs, strings.ToLower(decodeUnreserved(s)))
	}
	if len(segs) == 3 && segs[2] == "summary" {
		segs = segs[:2] // /r/{id}/summary: the resource's own version
	}
	if len(segs) != 2 {
		return ""
	}
	id := lenientID(segs[1])
	if n, err := strconv.ParseUint(strings.TrimLeft(id, "+"), 10, 64); err == nil {
		id = strconv.FormatUint(n, 10)
	}
	return segs[0] + "/" + id
}

// lenientID reads an id as PostgreSQL's int4 input does (blanks around
// it, %20 or %09 on the wire) and Rails' find("5-acme") does (the leading
// digits of a to_param slug): write-lenient-id. An id only some stacks
// read as a number, or read differently (0x5, 1_0, a full-width 5, NBSP
// around it: traffic's multiSpelling), it reads as PostgreSQL 16+ and
// Python's int() do (multiID).
func lenientID(id string) string {
	if n, ok := multiID(id); ok {
		return n
	}
	for _, b := range [...]string{"%20", "%09", " ", "\t"} {
		for strings.HasPrefix(id, b) || strings.HasSuffix(id, b) {
			id = strings.TrimSuffix(strings.TrimPrefix(id, b), b)
		}
	}
	if d, slug, ok := strings.Cut(id, "-"); ok && d != "" && slug != "" && strings.Trim(d, "0123456789") == "" {
		return d
	}
	return id
}

// multiID reads id, percent-decoded, as PostgreSQL 16+'s int8 input and
// Python's int() do, when it is spelled a way the other rules do not
// take: bytes past ASCII (Unicode blanks around it, Unicode decimal
// digits), a 0x, 0o or 0b prefix, underscores between digits; and a
// decimal with a fraction or an exponent as JavaScript's Number does
// (its value, when an integer: decimalID). Any other id is not its
// business (false).
func multiID(id string) (string, bool) {
	s, err := url.PathUnescape(id)
	if err != nil {
		return "", false
	}
	if n, ok := decimalID(s); ok {
		return n, true
	}
	wide := strings.ContainsFunc(s, func(r rune) bool { return r >= utf8.RuneSelf })
	s = strings.TrimFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == 0xfeff })
	s = strings.Map(func(r rune) rune {
		if r >= utf8.RuneSelf && unicode.IsDigit(r) {
			k := 0 // its place in its run of ten (Unicode's Nd runs)
			for unicode.IsDigit(r - rune(k) - 1) {
				k++
			}
			return '0' + rune(k%10)
		}
		return r
	}, s)
	t := strings.TrimLeft(s, "+-")
	base := 10
	switch {
	case len(t) > 1 && t[0] == '0' && strings.ContainsRune("xXoObB", rune(t[1])):
		base = 0 // Go's base 0 reads the prefix, and underscores after it
	case strings.Contains(t, "_"):
		if strings.Contains(t, "__") || strings.HasPrefix(t, "_") || strings.HasSuffix(t, "_") {
			return "", false
		}
		s = strings.ReplaceAll(s, "_", "")
	case !wide:
		return "", false
	}
	n, err := strconv.ParseInt(s, base, 64)
	if err != nil {
		return "", false
	}
	if n < 0 {
		n = -n
	}
	return strconv.FormatInt(n, 10), true
}

// decimalID reads s as a Node origin's Number(s) does when it is a
// decimal with a fraction or an exponent ("0.5e1", "50e-1", "5e2"): its
// value, without sign, when that is an integer within 2^53. Such a
// number in front of a slug ("50e-1-x") it reads as a PHP origin's (int)
// does: the number, the slug ignored.
func decimalID(s string) (string, bool) {
	t := strings.TrimFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == 0xfeff })
	if i := strings.LastIndex(t, "-x"); i > 0 && i+2 == len(t) && strings.ContainsAny(t[:i], "eE.") {
		t = t[:i] // traffic's multiSpelling: a slug after the number
	}
	if !strings.ContainsAny(t, ".eE") || strings.Trim(t, "+-.eE0123456789") != "" {
		return "", false
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v != math.Trunc(v) || math.Abs(v) > 1<<53 {
		return "", false
	}
	return strconv.FormatUint(uint64(math.Abs(v)), 10), true
}

// AppliedAnswer reports whether a write sent with query (answer=303, 502
// or 504: write-applied-other) was answered code by the origin after it
// applied it: acknowledged, although not a 2xx.
func AppliedAnswer(query string, code int) bool {
	v, ok := strings.CutPrefix(query, "answer=")
	return ok && v == strconv.Itoa(code)
}
