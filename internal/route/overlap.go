package route

import "strings"

// The two tests below answer, for a config reload (internal/server's
// retire.go), "could these two ever meet?" without enumerating values.
// They over-approximate: true unless the literal text around the params
// already rules a meeting out. A false is a proof; a true may be wrong,
// which costs a reload some extra misses (lenient for invalidation),
// never a stale answer.

// MayMeet reports whether t and u could expand to the same tag for some
// param values: a read route's tag template and a write route's
// invalidate template name the same entries only then.
func (t Template) MayMeet(u Template) bool {
	tl, tlit := t.literal()
	ul, ulit := u.literal()
	switch {
	case tlit && ulit:
		return tl == ul
	case tlit:
		return u.mayExpandTo(tl)
	case ulit:
		return t.mayExpandTo(ul)
	}
	return compatible(t.prefix(), u.prefix(), strings.HasPrefix) &&
		compatible(t.suffix(), u.suffix(), strings.HasSuffix)
}

// literal returns the template's text when it has no params.
func (t Template) literal() (string, bool) {
	for _, p := range t.parts {
		if p.param {
			return "", false
		}
	}
	return t.src, true
}

// mayExpandTo reports whether t, which has params, could expand to s.
func (t Template) mayExpandTo(s string) bool {
	p, q := t.prefix(), t.suffix()
	return len(s) >= len(p)+len(q) && strings.HasPrefix(s, p) && strings.HasSuffix(s, q)
}

// prefix and suffix are the literal text before the first param and after
// the last.
func (t Template) prefix() string {
	if len(t.parts) > 0 && !t.parts[0].param {
		return t.parts[0].text
	}
	return ""
}

func (t Template) suffix() string {
	if n := len(t.parts); n > 0 && !t.parts[n-1].param {
		return t.parts[n-1].text
	}
	return ""
}

// compatible reports whether one of a and b begins (has: strings.HasPrefix)
// or ends (strings.HasSuffix) with the other: a string that begins (ends)
// with both exists only then.
func compatible(a, b string, has func(s, affix string) bool) bool {
	return has(a, b) || has(b, a)
}

// MayOverlap reports whether some path could match both r's pattern and
// o's (whatever their methods): a route before another in the table takes
// the paths they share.
func (r *Route) MayOverlap(o *Route) bool {
	rl, rlit := r.pat.literal()
	ol, olit := o.pat.literal()
	switch {
	case rlit && olit:
		return rl == ol
	case rlit:
		_, ok := o.pat.match(rl, nil)
		return ok
	case olit:
		_, ok := r.pat.match(ol, nil)
		return ok
	}
	return compatible(r.pat.prefix(), o.pat.prefix(), strings.HasPrefix) &&
		compatible(r.pat.suffix(), o.pat.suffix(), strings.HasSuffix)
}

// literal returns the one path the pattern matches when it has no params.
func (pt *pattern) literal() (string, bool) {
	var b strings.Builder
	for _, sg := range pt.segs {
		if sg.kind != segStatic {
			return "", false
		}
		b.WriteString(sg.text)
	}
	return b.String(), true
}

// prefix and suffix are the static text before the first param (or
// wildcard) and after the last; a trailing wildcard has none after it.
func (pt *pattern) prefix() string {
	if len(pt.segs) > 0 && pt.segs[0].kind == segStatic {
		return pt.segs[0].text
	}
	return ""
}

func (pt *pattern) suffix() string {
	if n := len(pt.segs); n > 0 && pt.segs[n-1].kind == segStatic {
		return pt.segs[n-1].text
	}
	return ""
}
