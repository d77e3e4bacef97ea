// Package spelling holds the rule "lenient for invalidation, strict for
// storage" for URL paths: the many spellings a framework-shaped origin
// accepts for one resource, and the one spelling the cache stores.
//
// Common frameworks route leniently: Express and Rails match paths
// case-insensitively and with or without a trailing slash, most servers
// merge "//" and resolve dot segments (RFC 3986 §5.2.4), Tomcat and Jetty
// drop ";params" from a segment, and a database parses "05", "+5" and " 5"
// as 5, as Rails, parseInt and MySQL read "5-acme" (AppendInts). Some
// spellings are read as different integers by different stacks ("0x5"
// is 5 to PostgreSQL 16+ and JavaScript, 0 to Ruby and MySQL).
// A write spelled any of those ways changes the resource the canonical
// spelling names, so it must invalidate what was stored under the
// canonical spelling of each integer it may be read as. Over-invalidation costs a miss; under-invalidation
// serves a lie. Reads, on the other hand, are stored only under their
// canonical spelling, so one resource is one entry and one set of tags.
//
// Paths here are decoded URL paths (net/url's URL.Path), the form routes
// match: percent-encoding is normalised by the decoding itself.
//
// It is a leaf: pure functions of strings, fuzzed (spelling_fuzz_test.go).
package spelling

import (
	"strings"
	"unicode/utf8"
)

// Fold is the lenient form of path, used for URI tags: dot segments
// resolved, empty segments ("//", a trailing slash) dropped, ";params"
// stripped from each segment, a segment that reads as an integer
// (AppendInts: "05", "+5", " 5", "5-acme") as that integer, and
// everything lower-cased. Every spelling a lenient origin reads as one
// resource folds to one string, so a write under any of them and a read
// under the canonical one share a URI tag. A segment that reads as
// several integers ("0x5": 0 and 5) folds to its first here; AppendFolds
// gives them all.
func Fold(path string) string { return clean(path, true) }

// Canonical is Fold without lower-casing: the form a route table (which
// matches case-sensitively) can still match.
func Canonical(path string) string { return clean(path, false) }

// MaxFolds is the most spellings AppendFolds and Candidates give for one
// path: a path whose segments read as more combinations of integers than
// that ("/a/0x1/b/0x1/…", six ids each read two ways) is no app's link,
// and a write to it is refused rather than left to invalidate some of
// them (internal/writeinv).
const MaxFolds = 64

// AppendFolds appends to dst every folded spelling of path, each once:
// Fold's, and for each segment that reads as several integers (0x5: 0
// and 5) one per combination of its readings with the other segments'.
// A write to path drops the URI tag of each: the origin read it one of
// those ways (an entry is stored only for a path with one: CanonicalPath).
// It reports false, with dst as it was, when there are more than
// MaxFolds.
func AppendFolds(dst []string, path string) ([]string, bool) {
	return appendClean(dst, len(dst), path, true)
}

// Candidates are the spellings a write to path may name, for matching
// against a route table: path itself, then its Canonical and folded
// forms, each combination of its segments' readings (AppendFolds), each
// listed once. It reports false, with path alone, when there are more
// than MaxFolds of either form.
func Candidates(path string) ([]string, bool) {
	out := make([]string, 1, 3)
	out[0] = path
	out, ok := appendClean(out, 0, path, false)
	if ok {
		out, ok = appendClean(out, 0, path, true)
	}
	if !ok {
		return out[:1], false
	}
	return out, true
}

// CanonicalParam reports whether a route parameter's value is spelled the
// one way it is stored: not a number with a sign, leading zeros or blanks
// around it, no ";params", not a dot segment, not empty, not a number
// with a fraction or an exponent ("5.0", "5e0"), and not a spelling that
// reads as several integers ("0x5", "1_000", "5e2", "5e2-acme":
// AppendInts) or as one only by a reading of its digits other than
// ASCII's ("５", "\u00a05"). A read whose parameters are not canonical passes through
// uncached (strict for storage), while a write spelled that way still
// invalidates the canonical entry of each of its readings (Candidates).
//
// A slug that reads as one number ("5-acme": Rails' to_param) is
// canonical, and its entry carries its Reading's tags too. One that reads
// as several ("0x5-acme", "1_0-acme", "5e2-acme") is not: no app links it
// so, and which integer the origin took is its own parser's business, so the
// read passes through, the origin's own answer, rather than be stored
// under tags that must name every reading.
func CanonicalParam(v string) bool {
	if v == "" || v == "." || v == ".." || strings.IndexByte(v, ';') >= 0 {
		return false
	}
	var buf [MaxReadings]string
	ns := AppendInts(buf[:0], v)
	switch {
	case len(ns) == 0:
		return true
	case len(ns) > 1:
		return false
	case ns[0] == v:
		return true
	}
	// A slug read as n ("5-acme"): canonical for the app that links to
	// it (Rails' to_param), and stored, tagged also as n (Reading), so a
	// write to n drops it; blanks around it are no one's link, nor is a
	// signed run of digits ("05", "+5") or one of other digits ("５"),
	// nor a number with a fraction or an exponent ("5.0", "5e0"), which
	// JavaScript, PHP and MySQL read as its value.
	t := unsign(v)
	n := leadingDigits(t)
	if _, dec := decimalLiteral(v); dec {
		return false
	}
	return n > 0 && n < len(t) && blankFree(v)
}

// blankFree reports whether v neither starts nor ends with a blank any
// parser of AppendInts skips.
func blankFree(v string) bool {
	first, _ := utf8.DecodeRuneInString(v)
	last, _ := utf8.DecodeLastRuneInString(v)
	return !jsBlank(first) && !pyBlank(first) && !jsBlank(last) && !pyBlank(last)
}

// Reading is the value a lenient origin reads a route param v as, when
// that differs from v and is the only one: the integer of AppendInts. An
// entry stored under v also carries the tags its reading expands to, so a
// write to the canonical spelling drops it (strict for storage, without
// refusing slugs). A value with several readings is never stored
// (CanonicalParam), so it has no Reading.
func Reading(v string) (string, bool) {
	var buf [MaxReadings]string
	if ns := AppendInts(buf[:0], v); len(ns) == 1 && ns[0] != v {
		return ns[0], true
	}
	return "", false
}

// CanonicalPath reports whether path has no empty or dot segments (a
// trailing slash is the route's business: a pattern may end in one) and
// no segment that reads as several integers (AppendInts: "0x5"), so that
// an entry stored for it has one folded spelling (Fold's), whatever
// route param, literal or wildcard holds the segment.
func CanonicalPath(path string) bool {
	if path == "" || path[0] != '/' {
		return false
	}
	rest := path[1:]
	var buf [MaxReadings]string
	for rest != "" {
		seg, tail, more := strings.Cut(rest, "/")
		if seg == "" && more || seg == "." || seg == ".." || len(AppendInts(buf[:0], seg)) > 1 {
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

// cleanSegments is clean's work on a path that is not yet clean: each
// segment that reads as integers as its first.
func cleanSegments(path string, lower bool) string {
	var sb [8]string // on the stack for the usual path
	segs := resolve(sb[:0], path)
	var buf [MaxReadings]string
	for i, seg := range segs {
		segs[i] = foldSegment(seg, lower, AppendInts(buf[:0], seg), 0)
	}
	return "/" + strings.Join(segs, "/")
}

// appendClean appends to dst each spelling clean gives path for a choice
// of each segment's readings, each once and none already in dst[start:];
// false, with dst as it was, when there are more than MaxFolds.
func appendClean(dst []string, start int, path string, lower bool) ([]string, bool) {
	if isClean(path, lower) {
		return addReading(dst, start, path), true
	}
	var sb [8]string
	segs := resolve(sb[:0], path)
	var buf [MaxReadings]string
	total := 1
	for _, seg := range segs {
		if k := len(AppendInts(buf[:0], seg)); k > 1 {
			if total *= k; total > MaxFolds {
				return dst, false
			}
		}
	}
	out := make([]string, len(segs))
	for c := 0; c < total; c++ {
		rem := c
		for i, seg := range segs {
			ns := AppendInts(buf[:0], seg)
			out[i] = foldSegment(seg, lower, ns, rem)
			if len(ns) > 1 {
				rem /= len(ns)
			}
		}
		dst = addReading(dst, start, "/"+strings.Join(out, "/"))
	}
	return dst, true
}

// foldSegment is seg as clean writes it: its reading choice (modulo how
// many it has) when it reads as integers, else itself, lower-cased when
// lower.
func foldSegment(seg string, lower bool, ns []string, choice int) string {
	switch {
	case len(ns) > 0:
		return ns[choice%len(ns)]
	case lower:
		return lowerASCII(seg)
	}
	return seg
}

// resolve appends to segs path's segments with dot segments resolved
// (RFC 3986 §5.2.4), empty ones dropped and ";params" stripped.
func resolve(segs []string, path string) []string {
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
			segs = append(segs, seg)
		}
		if !more {
			return segs
		}
		rest = tail
	}
}

// isClean reports whether clean(path, lower) is path itself: a leading
// slash, then segments that are not empty (no "//", no trailing slash),
// not dot segments, hold no ';', read as no integer other than themselves
// (AppendInts), and (lower) hold no upper-case ASCII letter. "/" is clean.
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
		if !readsAsItself(seg) {
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

// readsAsItself reports whether seg reads as no integer other than
// itself (AppendInts).
func readsAsItself(seg string) bool {
	var buf [MaxReadings]string
	ns := AppendInts(buf[:0], seg)
	return len(ns) == 0 || len(ns) == 1 && ns[0] == seg
}
