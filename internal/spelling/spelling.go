// Package spelling holds the rule "lenient for invalidation, strict for
// storage" for URL paths: the many spellings a framework-shaped origin
// accepts for one resource, and the one spelling the cache stores.
//
// Common frameworks route leniently: Express and Rails match paths
// case-insensitively and with or without a trailing slash, most servers
// merge "//" and resolve dot segments (RFC 3986 §5.2.4), Tomcat and Jetty
// drop ";params" from a segment, and a database parses "05" and "+5" as 5.
// A write spelled any of those ways changes the resource the canonical
// spelling names, so it must invalidate what was stored under the
// canonical spelling. Over-invalidation costs a miss; under-invalidation
// serves a lie. Reads, on the other hand, are stored only under their
// canonical spelling, so one resource is one entry and one set of tags.
//
// Paths here are decoded URL paths (net/url's URL.Path), the form routes
// match: percent-encoding is normalised by the decoding itself.
//
// It is a leaf: pure functions of strings, fuzzed (spelling_fuzz_test.go).
package spelling

import "strings"

// Fold is the lenient form of path, used for URI tags: dot segments
// resolved, empty segments ("//", a trailing slash) dropped, ";params"
// stripped from each segment, numeric segments without sign or leading
// zeros, and everything lower-cased. Every spelling a lenient origin reads
// as one resource folds to one string, so a write under any of them and a
// read under the canonical one share a URI tag.
func Fold(path string) string { return clean(path, true) }

// Canonical is Fold without lower-casing: the form a route table (which
// matches case-sensitively) can still match.
func Canonical(path string) string { return clean(path, false) }

// Candidates are the spellings a write to path may name, for matching
// against a route table: path itself, its Canonical form and its Fold,
// each listed once, path first.
func Candidates(path string) []string {
	out := make([]string, 1, 3)
	out[0] = path
	for _, c := range [...]string{Canonical(path), Fold(path)} {
		if c != out[0] && (len(out) == 1 || c != out[1]) {
			out = append(out, c)
		}
	}
	return out
}

// CanonicalParam reports whether a route parameter's value is spelled the
// one way it is stored: not a number with a sign or leading zeros, no
// ";params", not a dot segment, not empty. A read whose parameters are not
// canonical passes through uncached (strict for storage), while a write
// spelled that way still invalidates the canonical entry (Candidates).
func CanonicalParam(v string) bool {
	if v == "" || v == "." || v == ".." || strings.IndexByte(v, ';') >= 0 {
		return false
	}
	if n, ok := number(v); ok {
		return n == v
	}
	return true
}

// CanonicalPath reports whether path has no empty or dot segments (a
// trailing slash is the route's business: a pattern may end in one).
func CanonicalPath(path string) bool {
	if path == "" || path[0] != '/' {
		return false
	}
	rest := path[1:]
	for rest != "" {
		seg, tail, more := strings.Cut(rest, "/")
		if seg == "" && more || seg == "." || seg == ".." {
			return false
		}
		rest = tail
	}
	return true
}

// clean resolves path segment by segment (RFC 3986 §5.2.4 for the dot
// segments), keeping a leading slash and dropping a trailing one.
//
// A path that is already in that form is returned as it is, with no
// allocation: the fill of every cached entry folds its path for the URI
// tag, and a per-ID path (/users/42) usually is.
func clean(path string, lower bool) string {
	if isClean(path, lower) {
		return path
	}
	return cleanSegments(path, lower)
}

// cleanSegments is clean's work on a path that is not yet clean.
func cleanSegments(path string, lower bool) string {
	var segs []string
	rest := path
	for {
		seg, tail, more := strings.Cut(rest, "/")
		if i := strings.IndexByte(seg, ';'); i >= 0 {
			seg = seg[:i]
		}
		switch seg {
		case "", ".":
		case "..":
			if len(segs) > 0 {
				segs = segs[:len(segs)-1]
			}
		default:
			if n, ok := number(seg); ok {
				seg = n
			} else if lower {
				seg = lowerASCII(seg)
			}
			segs = append(segs, seg)
		}
		if !more {
			break
		}
		rest = tail
	}
	return "/" + strings.Join(segs, "/")
}

// isClean reports whether clean(path, lower) is path itself: a leading
// slash, then segments that are not empty (no "//", no trailing slash),
// not dot segments, hold no ';', are numbers only without sign or leading
// zeros, and (lower) hold no upper-case ASCII letter. "/" is clean.
func isClean(path string, lower bool) bool {
	if path == "/" {
		return true
	}
	if len(path) < 2 || path[0] != '/' {
		return false
	}
	rest := path[1:]
	for {
		seg, tail, more := strings.Cut(rest, "/")
		if seg == "" || seg == "." || seg == ".." || strings.IndexByte(seg, ';') >= 0 {
			return false
		}
		if n, ok := number(seg); ok && n != seg {
			return false
		}
		if lower {
			for i := 0; i < len(seg); i++ {
				if c := seg[i]; 'A' <= c && c <= 'Z' {
					return false
				}
			}
		}
		if !more {
			return true
		}
		rest = tail
	}
}

// lowerASCII lower-cases ASCII letters only: other bytes stay as they are
// (strings.ToLower would turn bytes that are not UTF-8 into U+FFFD, and
// two distinct paths into one tag).
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// number returns the decimal s without its sign and leading zeros, when s
// is an optionally signed run of ASCII digits (as parseInt, pg and most
// frameworks read an integer id).
func number(s string) (string, bool) {
	d := s
	if d != "" && (d[0] == '+' || d[0] == '-') {
		d = d[1:]
	}
	if d == "" {
		return "", false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return "", false
		}
	}
	d = strings.TrimLeft(d, "0")
	if d == "" {
		d = "0"
	}
	return d, true
}
