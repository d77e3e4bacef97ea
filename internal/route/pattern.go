package route

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unsafe"
)

// A pattern is a chi-style route pattern compiled to a list of segments.
// It matches exactly as a chi.Mux holding only that pattern would (the
// differential tests hold it to that), without building a router or
// allocating per request.
//
//	/clients/{id}          {id} is the text up to the next "/", never empty at the end
//	/files/{name}.{ext}    a param ends at the byte that follows it in the pattern
//	/v/{n:[0-9]+}          the regexp must match the whole value (chi anchors it)
//	/static/*              "*" takes the rest of the path, possibly empty
type pattern struct {
	segs  []segment
	names []string // param names in order; "*" for the wildcard
}

type segKind uint8

const (
	segStatic segKind = iota
	segParam
	segRegexp
	segWildcard
)

type segment struct {
	kind segKind
	text string // the literal, or the param name
	raw  string // for params: as written, braces included
	tail byte   // for params: the byte that ends the value
	rex  *regexp.Regexp
}

func parsePattern(p string) (pattern, error) {
	var pt pattern
	if p == "" || p[0] != '/' {
		return pt, errors.New("must begin with '/'")
	}
	lit := 0 // start of the pending literal
	flush := func(end int) {
		if end > lit {
			pt.segs = append(pt.segs, segment{kind: segStatic, text: p[lit:end]})
		}
	}
	for i := 0; i < len(p); {
		switch p[i] {
		case '}':
			return pt, fmt.Errorf("unmatched '}' at offset %d", i)
		case '*':
			if i != len(p)-1 {
				return pt, errors.New("'*' must be the last character")
			}
			flush(i)
			pt.segs = append(pt.segs, segment{kind: segWildcard, text: "*"})
			pt.names = append(pt.names, "*")
			return pt, nil
		case '{':
			flush(i)
			end := closingBrace(p, i)
			if end < 0 {
				return pt, fmt.Errorf("param at offset %d lacks its closing '}'", i)
			}
			seg, err := parseParam(p[i+1 : end])
			if err != nil {
				return pt, err
			}
			seg.raw = p[i : end+1]
			seg.tail = '/'
			if end+1 < len(p) {
				seg.tail = p[end+1]
				if seg.tail == '{' || seg.tail == '*' {
					return pt, fmt.Errorf("param {%s} must be followed by a literal", seg.text)
				}
			}
			for _, n := range pt.names {
				if n == seg.text {
					return pt, fmt.Errorf("duplicate param {%s}", n)
				}
			}
			pt.segs = append(pt.segs, seg)
			pt.names = append(pt.names, seg.text)
			i = end + 1
			lit = i
		default:
			i++
		}
	}
	flush(len(p))
	return pt, nil
}

// closingBrace returns the index of the "}" closing the "{" at open,
// counting nested braces as chi does (for regexps like [0-9]{3}).
func closingBrace(p string, open int) int {
	depth := 0
	for i := open; i < len(p); i++ {
		switch p[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

func parseParam(inner string) (segment, error) {
	name, rexpat, isRegexp := strings.Cut(inner, ":")
	if err := checkName(name); err != nil {
		return segment{}, err
	}
	if !isRegexp {
		return segment{kind: segParam, text: name}, nil
	}
	if rexpat == "" {
		return segment{}, fmt.Errorf("param {%s} has an empty regexp", name)
	}
	// Anchor exactly as chi does, so "a|b" means what it means there.
	if rexpat[0] != '^' {
		rexpat = "^" + rexpat
	}
	if rexpat[len(rexpat)-1] != '$' {
		rexpat += "$"
	}
	rex, err := regexp.Compile(rexpat)
	if err != nil {
		return segment{}, fmt.Errorf("param {%s}: %w", name, err)
	}
	return segment{kind: segRegexp, text: name, rex: rex}, nil
}

// checkName keeps param names to what templates can name unambiguously.
func checkName(name string) error {
	if name == "" {
		return errors.New("empty param name")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Errorf("param name %q: only letters, digits, '_', '-' and '.' are allowed", name)
		}
	}
	return nil
}

// match appends the params of path to ps. It follows chi's tree walk for a
// single pattern: a param needs a non-empty rest of path, takes the text up
// to its tail byte (all of it when the tail is "/" and absent), may be
// empty only mid-pattern and only without a regexp, and never crosses a
// "/" unless its regexp allows it.
func (pt *pattern) match(path string, ps Params) (Params, bool) {
	s := path
	for i := range pt.segs {
		sg := &pt.segs[i]
		switch sg.kind {
		case segStatic:
			if !strings.HasPrefix(s, sg.text) {
				return ps, false
			}
			s = s[len(sg.text):]
		case segParam, segRegexp:
			if s == "" {
				return ps, false
			}
			n := strings.IndexByte(s, sg.tail)
			switch {
			case n < 0 && sg.tail == '/':
				n = len(s)
			case n < 0, n == 0 && sg.kind == segRegexp:
				return ps, false
			}
			v := s[:n]
			if sg.kind == segRegexp {
				if !sg.rex.MatchString(v) {
					return ps, false
				}
			} else if strings.IndexByte(v, '/') >= 0 {
				return ps, false
			}
			ps = append(ps, Param{Key: sg.text, Value: v})
			s = s[n:]
		case segWildcard:
			ps = append(ps, Param{Key: "*", Value: s})
			s = ""
		}
	}
	return ps, s == ""
}

// PathFor is the path a client would request for value as param: the
// route's pattern with value in place of {param} (a batch route's per-ID
// path). It is built from the parsed pattern, so a param reads exactly as
// the matcher reads it, braces of its regexp included. The value goes in
// raw: the result is a decoded URL.Path. Other params stay as written.
//
// Its length is counted first, so the path costs one allocation: a batch
// builds one per element of every bulk answer.
func (r *Route) PathFor(param, value string) string { return r.PrefixedPathFor("", param, value) }

// PrefixedPathFor is prefix followed by PathFor(param, value), in the one
// allocation: a batch's element takes its path from the end of its URI
// tag (surrogate.URITagPrefix), which is then not built again.
func (r *Route) PrefixedPathFor(prefix, param, value string) string {
	n := len(prefix)
	for _, s := range r.pat.segs {
		switch {
		case s.kind == segStatic || s.kind == segWildcard:
			n += len(s.text)
		case s.text == param:
			n += len(value)
		default:
			n += len(s.raw)
		}
	}
	b := r.AppendPathFor(make([]byte, 0, n), prefix, param, value)
	return unsafe.String(unsafe.SliceData(b), len(b)) // as strings.Builder: b is not written again
}

// AppendPathFor appends prefix and PathFor(param, value) to b, so that a
// caller can lay the path out in memory it allocates with what lives as
// long (a bulk answer's element: its entry's key and tags).
func (r *Route) AppendPathFor(b []byte, prefix, param, value string) []byte {
	b = append(b, prefix...)
	for _, s := range r.pat.segs {
		switch {
		case s.kind == segStatic || s.kind == segWildcard:
			b = append(b, s.text...)
		case s.text == param:
			b = append(b, value...)
		default:
			b = append(b, s.raw...)
		}
	}
	return b
}
