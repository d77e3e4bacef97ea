// Package spelling holds the rule "lenient for invalidation, strict for
// storage" for URL paths: the many spellings a framework-shaped origin
// accepts for one resource, and the one spelling the cache stores.
//
// Common frameworks route leniently: Express and Rails match paths
// case-insensitively and with or without a trailing slash, most servers
// merge "//" and resolve dot segments (RFC 3986 §5.2.4), Tomcat and Jetty
// drop ";params" from a segment, and a database parses "05", "+5" and " 5"
// as 5, as Rails, parseInt and MySQL read "5-acme" (Int).
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
// stripped from each segment, a segment that reads as an integer (Int:
// "05", "+5", " 5", "5-acme") as that integer, and everything
// lower-cased. Every spelling a lenient origin reads
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
// one way it is stored: not a number with a sign, leading zeros or blanks
// around it, no ";params", not a dot segment, not empty. A read whose
// parameters are not canonical passes through uncached (strict for
// storage), while a write spelled that way still invalidates the
// canonical entry (Candidates). A slug that reads as a number ("5-acme",
// Int) is canonical, and its entry carries its Reading's tags too.
func CanonicalParam(v string) bool {
	if v == "" || v == "." || v == ".." || strings.IndexByte(v, ';') >= 0 {
		return false
	}
	n, whole, ok := Int(v)
	switch {
	case !ok:
		return true
	case whole:
		return n == v
	}
	// A slug read as n ("5-acme"): canonical for the app that links to
	// it (Rails' to_param), and stored, tagged also as n (Reading), so a
	// write to n drops it; blanks around it are no one's link.
	return trimBlanks(v) == v
}

// Reading is the value a lenient origin reads a route param v as, when
// that differs from v: the integer of Int. An entry stored under v also
// carries the tags its reading expands to, so a write to the canonical
// spelling drops it (strict for storage, without refusing slugs).
func Reading(v string) (string, bool) {
	if n, _, ok := Int(v); ok && n != v {
		return n, true
	}
	return "", false
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
// not dot segments, hold no ';', read as no integer other than themselves
// (Int), and (lower) hold no upper-case ASCII letter. "/" is clean.
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

// number returns the integer a lenient origin reads s as (Int), when it
// reads one.
func number(s string) (string, bool) {
	n, _, ok := Int(s)
	return n, ok
}

// Int is the one rule, for every path (writes, URI tags, stored reads,
// the ids of a batch or a split list), of which integer a lenient origin
// reads a path segment or id as: n is its decimal without sign or leading
// zeros; ok is false when s reads as no integer. whole is false when s
// reads as n only by a lenient reading of more than a signed run of digits.
//
// The readings it accepts are those of common stacks:
//   - a sign and leading zeros: "+5", "-5", "05" (parseInt, PostgreSQL,
//     most frameworks; "-5" is folded too, over-invalidating);
//   - ASCII blanks around the number: " 5", "5\t" (PostgreSQL's int4 input
//     skips isspace() on both sides; so do Ruby's to_i and parseInt in
//     front);
//   - leading digits followed by anything that is not a digit: "5-acme",
//     "5.json", "5abc" (Rails' find("5-acme") and the to_param slug idiom,
//     Ruby's to_i, parseInt, MySQL's string-to-int cast).
//
// Lenient for invalidation: a write to any of these spellings may have
// changed resource n. Segments that merely start with digits (a date, a
// UUID, a hash) read as n too; that over-invalidates, which costs misses.
func Int(s string) (n string, whole, ok bool) {
	t := trimBlanks(s)
	whole = len(t) == len(s)
	if t != "" && (t[0] == '+' || t[0] == '-') {
		t = t[1:]
	}
	end := 0
	for end < len(t) && '0' <= t[end] && t[end] <= '9' {
		end++
	}
	if end == 0 {
		return "", false, false
	}
	whole = whole && end == len(t)
	n = strings.TrimLeft(t[:end], "0")
	if n == "" {
		n = "0"
	}
	return n, whole, true
}

// trimBlanks drops the bytes C's isspace() accepts, which PostgreSQL's
// int4 input skips, from both ends of s; other bytes (Unicode spaces) stay.
func trimBlanks(s string) string {
	for s != "" && blank(s[0]) {
		s = s[1:]
	}
	for s != "" && blank(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

func blank(c byte) bool { return c == ' ' || '\t' <= c && c <= '\r' }
