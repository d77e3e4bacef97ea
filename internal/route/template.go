package route

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sidecache/sidecache/internal/spelling"
)

// A Template is a surrogate-key template such as "client:{id}": literal
// text with {name} references to the route's path params. Tags written by
// the read route and by the write route meet only if both expand the same
// params the same way, so Expand inserts values exactly as matched.
type Template struct {
	src   string
	parts []tplPart
}

type tplPart struct {
	text  string // literal text, or the param name
	param bool
}

// ParseTemplate parses s. Which names exist is the route's business:
// Compile rejects a template naming a param its pattern lacks.
func ParseTemplate(s string) (Template, error) {
	t := Template{src: s}
	if s == "" {
		return t, errors.New("empty template")
	}
	for rest := s; rest != ""; {
		i := strings.IndexAny(rest, "{}")
		if i < 0 {
			t.parts = append(t.parts, tplPart{text: rest})
			break
		}
		if rest[i] == '}' {
			return t, fmt.Errorf("template %q: unmatched '}'", s)
		}
		if i > 0 {
			t.parts = append(t.parts, tplPart{text: rest[:i]})
		}
		end := strings.IndexByte(rest[i:], '}')
		if end < 0 {
			return t, fmt.Errorf("template %q: '{' lacks its closing '}'", s)
		}
		name := rest[i+1 : i+end]
		if name != "*" {
			if err := checkName(name); err != nil {
				return t, fmt.Errorf("template %q: %w", s, err)
			}
		}
		t.parts = append(t.parts, tplPart{text: name, param: true})
		rest = rest[i+end+1:]
	}
	return t, nil
}

// MustParseTemplate is ParseTemplate for literals known to be valid; it
// panics otherwise.
func MustParseTemplate(s string) Template {
	t, err := ParseTemplate(s)
	if err != nil {
		panic(err)
	}
	return t
}

// Expand fills in the params; a name p lacks expands to "".
func (t Template) Expand(p Params) string {
	if len(t.parts) == 1 && !t.parts[0].param {
		return t.parts[0].text
	}
	n := 0
	for _, pt := range t.parts {
		if pt.param {
			n += len(p.Get(pt.text))
		} else {
			n += len(pt.text)
		}
	}
	var b strings.Builder
	b.Grow(n)
	for _, pt := range t.parts {
		if pt.param {
			b.WriteString(p.Get(pt.text))
		} else {
			b.WriteString(pt.text)
		}
	}
	return b.String()
}

// AppendExpand appends Expand(p) to b.
func (t Template) AppendExpand(b []byte, p Params) []byte {
	for _, pt := range t.parts {
		if pt.param {
			b = append(b, p.Get(pt.text)...)
		} else {
			b = append(b, pt.text...)
		}
	}
	return b
}

// AppendReadings appends to tags each of ts expanded with p's values as a
// lenient origin reads them (spelling.Reading: "5-acme" and "05" as 5),
// when one of p's values reads as another, and each tag only once. A
// value that reads as several integers ("0x5") has no Reading: it is
// never stored (spelling.CanonicalParam), only invalidated. An
// entry stored for /clients/5-acme is the origin's client 5: it carries
// client:5 as /clients/5's entry does, so a write to /clients/5 drops it
// (strict for storage, without refusing the slug). Nothing is allocated
// when every value reads as itself.
func AppendReadings(tags []string, ts []Template, p Params) []string {
	var rp Params
	for i := range p {
		if n, ok := spelling.Reading(p[i].Value); ok {
			if rp == nil {
				rp = slices.Clone(p)
			}
			rp[i].Value = n
		}
	}
	if rp == nil {
		return tags
	}
	for _, t := range ts {
		if s := t.Expand(rp); !slices.Contains(tags, s) {
			tags = append(tags, s)
		}
	}
	return tags
}

// Params returns the names the template refers to, in order.
func (t Template) Params() []string {
	var names []string
	for _, pt := range t.parts {
		if pt.param {
			names = append(names, pt.text)
		}
	}
	return names
}

// String returns the template as written.
func (t Template) String() string { return t.src }

// MarshalText writes the template as written, for GET /routes.
func (t Template) MarshalText() ([]byte, error) { return []byte(t.src), nil }

// Carries reports whether tags holds every tag ts expanded with p gives
// (Expand), and, when one of p's values reads as another, every tag of
// those readings as well (AppendReadings): whether an entry whose tags are
// tags is reached by every invalidation the route now makes for p. It
// compares in place and allocates nothing, for it runs on every hit.
//
// Tags beyond those are not asked about: an extra tag only makes the entry
// dropped by more writes (over-invalidation costs a miss, never a lie).
func Carries(tags []string, ts []Template, p Params) bool {
	read := false
	for i := range p {
		if _, ok := spelling.Reading(p[i].Value); ok {
			read = true
			break
		}
	}
	for _, t := range ts {
		if !t.in(tags, p, false) || read && !t.in(tags, p, true) {
			return false
		}
	}
	return true
}

// in reports whether tags holds t expanded with p, each value read as
// spelling.Reading reads it when read is set and it has a reading.
func (t Template) in(tags []string, p Params, read bool) bool {
	for _, s := range tags {
		if t.matches(s, p, read) {
			return true
		}
	}
	return false
}

// matches reports whether s is t expanded with p (read: as in in).
func (t Template) matches(s string, p Params, read bool) bool {
	for _, pt := range t.parts {
		v := pt.text
		if pt.param {
			v = p.Get(pt.text)
			if read {
				if n, ok := spelling.Reading(v); ok {
					v = n
				}
			}
		}
		if !strings.HasPrefix(s, v) {
			return false
		}
		s = s[len(v):]
	}
	return s == ""
}
