package bulk

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// maxDepth is encoding/json's nesting bound (its maxNestingDepth): an
// answer nested deeper is invalid to json.Valid, so it is to valid too.
const maxDepth = 10000

// valid reports whether b is one JSON value (RFC 8259 §2) exactly as
// json.Valid judges it — strings may hold any byte from 0x20 up, invalid
// UTF-8 included, as encoding/json's scanner accepts — and whether it has
// whitespace outside its strings, which json.Compact would remove.
//
// One pass of a hand-written scanner instead of json.Valid and a second
// pass for the whitespace: a bulk answer is validated once per call, and
// json.Valid's table-driven state machine was half of Split's time.
// FuzzValid holds it to json.Valid's verdict.
func valid(b []byte) (ok, spaced bool) {
	v := validator{b: b}
	return v.check()
}

// check is valid for v.b, recording the elements of a top-level array
// in v.elems when v.record is set.
func (v *validator) check() (ok, spaced bool) {
	i := v.ws(0)
	i, ok = v.value(i, 0)
	if !ok {
		return false, false
	}
	return v.ws(i) == len(v.b), v.spaced
}

type validator struct {
	b      []byte
	spaced bool
	// record: each element of a top-level array goes to elems as the
	// scan passes it, with the value of its last top-level field named
	// idField when it is an object, so that the answer's elements and
	// ids are found in the one pass that validates it (elements), not
	// by a second walk of every element's fields after it.
	record  bool
	idField string
	elems   []span
}

// span is one element of a top-level array: b[start:end], and, for an
// object, the value of its id field at b[idStart:idEnd] (idEnd 0: none).
type span struct{ start, end, idStart, idEnd int }

// ws skips whitespace from b[i] and returns the index past it.
func (v *validator) ws(i int) int {
	for i < len(v.b) {
		switch v.b[i] {
		case ' ', '\t', '\n', '\r':
			v.spaced = true
			i++
		default:
			return i
		}
	}
	return i
}

// value checks the value starting at b[i], inside depth containers, and
// returns the index past it.
func (v *validator) value(i, depth int) (int, bool) {
	b := v.b
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		return v.str(i)
	case c == '{':
		return v.object(i, depth+1)
	case c == '[':
		return v.array(i, depth+1)
	case c == '-' || '0' <= c && c <= '9':
		return v.number(i)
	case c == 't':
		return lit(b, i, "true")
	case c == 'f':
		return lit(b, i, "false")
	case c == 'n':
		return lit(b, i, "null")
	}
	return i, false
}

func lit(b []byte, i int, word string) (int, bool) {
	if len(b)-i < len(word) || string(b[i:i+len(word)]) != word {
		return i, false
	}
	return i + len(word), true
}

// object checks the object starting at b[i] ('{').
func (v *validator) object(i, depth int) (int, bool) {
	if depth > maxDepth {
		return i, false
	}
	b := v.b
	// An element of the top-level array (the only containers at depth
	// 1 are top-level ones, and a span is only recorded for an array's).
	elem := v.record && depth == 2 && len(v.elems) > 0
	i = v.ws(i + 1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, false
		}
		key := i
		var ok bool
		if i, ok = v.str(i); !ok {
			return i, false
		}
		isID := elem && keyIs(b[key:i], v.idField)
		if i = v.ws(i); i >= len(b) || b[i] != ':' {
			return i, false
		}
		start := v.ws(i + 1)
		if i, ok = v.value(start, depth); !ok {
			return i, false
		}
		if isID { // the last one counts, as encoding/json's does
			s := &v.elems[len(v.elems)-1]
			s.idStart, s.idEnd = start, i
		}
		if i = v.ws(i); i >= len(b) {
			return i, false
		}
		switch b[i] {
		case '}':
			return i + 1, true
		case ',':
			i = v.ws(i + 1)
		default:
			return i, false
		}
	}
}

// array checks the array starting at b[i] ('[').
func (v *validator) array(i, depth int) (int, bool) {
	if depth > maxDepth {
		return i, false
	}
	b := v.b
	i = v.ws(i + 1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	rec := v.record && depth == 1
	for {
		if rec {
			v.elems = append(v.elems, span{start: i})
		}
		var ok bool
		if i, ok = v.value(i, depth); !ok {
			return i, false
		}
		if rec {
			v.elems[len(v.elems)-1].end = i
		}
		if i = v.ws(i); i >= len(b) {
			return i, false
		}
		switch b[i] {
		case ']':
			return i + 1, true
		case ',':
			i = v.ws(i + 1)
		default:
			return i, false
		}
	}
}

// str checks the string starting at b[i] ('"'): escapes as RFC 8259 §7
// lists them, no control character; any other byte passes.
func (v *validator) str(i int) (int, bool) {
	b := v.b
	for i++; i < len(b); i++ {
		for words := 0; i+8 <= len(b); words++ {
			if words == shortWords {
				return strLong(b, i)
			}
			m := special8(binary.LittleEndian.Uint64(b[i:]))
			if m != 0 {
				i += bits.TrailingZeros64(m) >> 3 // the first special byte
				break
			}
			i += 8
		}
		if i >= len(b) {
			break
		}
		if strPlain[b[i]] {
			continue // the usual byte: one load and a test, not the switch's three
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\':
			i++
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(b)-i <= 4 || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					return i, false
				}
				i += 4
			default:
				return i, false
			}
		case c < 0x20:
			return i, false
		}
	}
	return i, false
}

// shortWords is how many plain words str reads 8 bytes at a time before
// it takes a string for a long one (strLong): a key or a short value (a
// name, an e-mail address, a date) ends within them, and is not worth
// strLong's calls (BenchmarkValidBio, task-clock: 2 words 4.7 µs, 4 words
// 4.2, 8 words 4.5).
const shortWords = 4

// strLong is str for the rest of a long string, from b[i], not inside an
// escape. A bio or a description is most of a bulk answer's bytes, and
// special8 took three tests per 8 of them: bytes.IndexByte finds the
// closing quote, and the first backslash before it, many bytes at a
// time, and the bytes between are only checked for a control character
// (controls, four words a test). Linear whatever the escapes: the quote
// is looked for again only once an escape passed it (\"), and each
// backslash search stops at the one it finds.
func strLong(b []byte, i int) (int, bool) {
	q := -1 // the closing quote's place, when found past i
	for {
		if q < i {
			n := bytes.IndexByte(b[i:], '"')
			if n < 0 {
				return len(b), false
			}
			q = i + n
		}
		seg := b[i:q]
		e := bytes.IndexByte(seg, '\\')
		if e >= 0 {
			seg = seg[:e]
		}
		if controls(seg) {
			return i, false
		}
		if e < 0 {
			return q + 1, true
		}
		// The escaped byte: at q at the latest, as the quote ends seg.
		i += e + 1
		switch b[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i++
		case 'u':
			if len(b)-i <= 4 || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
				return i, false
			}
			i += 5
		default:
			return i, false
		}
	}
}

// controls reports whether s holds a byte below 0x20, which a JSON string
// may not hold as it is: four words a test, as special8 tests one.
func controls(s []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	ctl := func(w uint64) uint64 { return (w - ones*0x20) &^ w }
	for len(s) >= 32 {
		w0, w1 := binary.LittleEndian.Uint64(s), binary.LittleEndian.Uint64(s[8:])
		w2, w3 := binary.LittleEndian.Uint64(s[16:]), binary.LittleEndian.Uint64(s[24:])
		if (ctl(w0)|ctl(w1)|ctl(w2)|ctl(w3))&highs != 0 {
			return true
		}
		s = s[32:]
	}
	for len(s) >= 8 {
		if ctl(binary.LittleEndian.Uint64(s))&highs != 0 {
			return true
		}
		s = s[8:]
	}
	for _, c := range s {
		if c < 0x20 {
			return true
		}
	}
	return false
}

// special8 flags the bytes of w (8 bytes, little-endian) a string may not
// hold as they are (not strPlain: below 0x20, a quote, a backslash) in
// their high bits; 0 when there is none. A bulk answer's strings (a bio,
// a description) are most of its bytes, and were checked one byte at a
// time: str skips them 8 at a time, and goes straight to the byte that
// ends a short one. Each test (x - 0x01…01 & ^x & 0x80…80, with x the
// byte less 0x20, or xor a quote or a backslash) flags no byte unless one
// is special, and the lowest byte it flags is special: a false flag needs
// a borrow, which only a special byte below it starts.
func special8(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := w ^ ones*'"'
	s := w ^ ones*'\\'
	return ((w-ones*0x20)&^w | (q-ones)&^q | (s-ones)&^s) & highs
}

// strPlain holds the bytes a string may hold as they are: from 0x20 up,
// but '"' and '\'. Read only.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// number checks the number starting at b[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (v *validator) number(i int) (int, bool) {
	b := v.b
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return i, false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
