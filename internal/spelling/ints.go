package spelling

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxReadings is the most integers AppendInts gives for one spelling: one
// per parser it follows.
const MaxReadings = 8

// AppendInts appends to dst each integer a lenient origin may read s, a
// path segment or id, as: each a decimal without sign or leading zeros,
// each once; nothing when no such parser reads s as an integer. It is the
// one rule, for every path (writes, URI tags, stored reads, the ids of a
// batch or a split list), of which integers an id names.
//
// One spelling can name several integers, because stacks read it
// differently: "0x5" is 5 to PostgreSQL 16+ and JavaScript but 0 to
// Ruby's to_i, Rails' find and MySQL; "1_000" is 1000 to PostgreSQL,
// Python and Ruby but 1 to parseInt. The parsers followed, each exactly:
//
//   - MySQL's string-to-integer cast: C blanks, a sign, the leading ASCII
//     digits ("5-acme" is 5, "0x5" is 0);
//   - Ruby's String#to_i, which Rails' find applies to an id that starts
//     with a digit: C blanks, a sign, an optional "0d", the leading
//     digits with single underscores between them ("1_000" is 1000);
//   - JavaScript's parseInt: Unicode blanks in front (ECMA-262
//     WhiteSpace and LineTerminator, U+FEFF too), a sign, "0x" and the
//     leading hex digits or the leading decimal digits;
//   - JavaScript's Number, for what parseInt does not read: the whole
//     string, trimmed, as "0x", "0o" or "0b" and its digits;
//   - a number with a fraction or an exponent ("0.5e1", "50e-1", "5e2"),
//     the whole string trimmed as Number trims it: its value when that
//     is an integer to Number and to MySQL (which compares an integer
//     column with it as doubles), truncated toward zero to PHP's (int)
//     (decimalJS), within int64;
//   - MySQL's comparison and PHP's (int) of a spelling that starts with
//     such a number and goes on ("5e2-acme", "0.5e1-x"): the number in
//     front, its value as above, the rest ignored (decimalPrefix), so
//     "5e2-acme" is 500 to them and 5 to Ruby's to_i and parseInt;
//   - PostgreSQL 16+ int8 input: C blanks around the whole string, a
//     sign, "0x", "0o" or "0b" and its digits with single underscores
//     (its decimal reading is always Ruby's too);
//   - Python's int(): Unicode blanks (White_Space) around the whole
//     string, a sign, Unicode decimal digits (U+FF15 is 5) with single
//     underscores; Java's Long.parseLong reads a subset of those.
//
// A reading past what its parser holds exactly is not one: JavaScript's
// past 2^53 (a double rounds it), PostgreSQL's past int8.
//
// Lenient for invalidation: a write to s may have changed any of them.
// Strict for storage: a read whose id has several is not stored
// (CanonicalParam). Segments that merely start with digits (a date, a
// UUID, a hash) read as their leading digits too; that over-invalidates,
// which costs misses. One whose digits run into an 'e' and more digits
// ("3e5a7c", a hex hash) reads as that number as well (300000, to MySQL
// and PHP): two readings, so it is not stored, as "0x5-acme" is not.
//
// The canonical id, ASCII digits alone, is read without allocating, and so
// is a slug ("5-acme") and anything that starts with a letter.
func AppendInts(dst []string, s string) []string {
	if s == "" {
		return dst
	}
	i := 0
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	if i == len(s) {
		return append(dst, trimZeros(s)) // every parser reads it so
	}
	if i > 0 && s[i] < utf8.RuneSelf && s[i] != '_' && (i > 1 || s[0] != '0' || !radixLetter(s[1])) && !decimalTail(s[i:]) {
		// A slug ("5-acme"): its leading digits, followed by an ASCII
		// byte that neither joins digits nor makes a prefix nor starts
		// a fraction or an exponent, are every parser's reading or none.
		return append(dst, trimZeros(s[:i]))
	}
	if !mayRead(s[0]) {
		return dst
	}
	return appendLenient(dst, s)
}

// radixLetter reports whether c after a leading "0" makes a prefix some
// parser reads: 0x, 0o, 0b, and Ruby's 0d.
func radixLetter(c byte) bool {
	switch c | 0x20 {
	case 'x', 'o', 'b', 'd':
		return true
	}
	return false
}

// mayRead reports whether a spelling starting with c may read as an
// integer: a sign, a digit, a '.' (".5e1"), a blank, or the first byte of
// a Unicode blank or digit.
func mayRead(c byte) bool {
	return c == '+' || c == '.' || c == '-' || '0' <= c && c <= '9' || c == ' ' || '\t' <= c && c <= '\r' || c >= utf8.RuneSelf
}

func appendLenient(dst []string, s string) []string {
	start := len(dst)
	t := unsign(strings.TrimLeft(s, cBlanks))
	if n := leadingDigits(t); n > 0 {
		dst = addReading(dst, start, trimZeros(t[:n])) // MySQL
	}
	if n, ok := rubyToI(t); ok {
		dst = addReading(dst, start, n)
	}
	for _, read := range wholeReaders {
		if n, ok := read(s); ok {
			dst = addReading(dst, start, n)
		}
	}
	return dst
}

// wholeReaders are the stacks' readers of the whole spelling (blanks and
// sign included), in appendLenient's order: parseInt and Number
// (JavaScript), a decimal's value (JavaScript's Number, decimal.go), a
// number in front of a slug (PHP's (int), MySQL: decimal.go), PostgreSQL's
// int8 and Python's int().
var wholeReaders = [...]func(string) (string, bool){parseIntJS, numberJS, decimalJS, decimalPrefix, pgInt8, pythonInt}

func addReading(dst []string, start int, n string) []string {
	for _, m := range dst[start:] {
		if m == n {
			return dst
		}
	}
	return append(dst, n)
}

// cBlanks are the bytes C's isspace() accepts in the C locale, which
// PostgreSQL, MySQL and Ruby skip.
const cBlanks = " \t\n\v\f\r"

// jsBlank is ECMA-262's StrWhiteSpaceChar: WhiteSpace (U+FEFF and every
// Zs among them) and LineTerminator, which is Unicode's White_Space but
// U+0085.
func jsBlank(r rune) bool { return r == 0xfeff || r != 0x85 && unicode.IsSpace(r) }

// pyBlank is what Python's int() strips: Unicode's White_Space past ASCII
// (str.isspace(), which int() turns into ' '), and in ASCII C's isspace()
// (int() keeps the ASCII separators U+001C to U+001F, which isspace()
// counts, as they are, and refuses them).
func pyBlank(r rune) bool { return unicode.IsSpace(r) }

func unsign(t string) string {
	if t != "" && (t[0] == '+' || t[0] == '-') {
		return t[1:]
	}
	return t
}

func leadingDigits(t string) int {
	n := 0
	for n < len(t) && '0' <= t[n] && t[n] <= '9' {
		n++
	}
	return n
}

// trimZeros is the decimal run d without its leading zeros ("0" for zero).
func trimZeros(d string) string {
	for len(d) > 1 && d[0] == '0' {
		d = d[1:]
	}
	return d
}

// rubyToI is String#to_i of t, blanks and sign already skipped: an
// optional "0d", then digits with single underscores between them.
func rubyToI(t string) (string, bool) {
	if len(t) >= 2 && t[0] == '0' && t[1]|0x20 == 'd' {
		t = t[2:]
	}
	n := leadingDigits(t)
	if n == 0 {
		return "", false
	}
	end := n
	for end+1 < len(t) && t[end] == '_' && '0' <= t[end+1] && t[end+1] <= '9' {
		end += 2
		end += leadingDigits(t[end:])
	}
	if end == n {
		return trimZeros(t[:n]), true
	}
	return trimZeros(strings.ReplaceAll(t[:end], "_", "")), true
}

// maxSafe is the largest integer a JavaScript number holds exactly, and
// past which no two ids stay apart.
const maxSafe = 1 << 53

// parseIntJS is parseInt(s) with no radix.
func parseIntJS(s string) (string, bool) {
	t := unsign(strings.TrimLeftFunc(s, jsBlank))
	if len(t) >= 2 && t[0] == '0' && t[1]|0x20 == 'x' {
		v, _, ok := radix(t[2:], 16, false)
		if !ok || v > maxSafe {
			return "", false
		}
		return strconv.FormatUint(v, 10), true
	}
	n := leadingDigits(t)
	if n == 0 {
		return "", false
	}
	d := trimZeros(t[:n])
	if len(d) > 16 || len(d) == 16 && d > "9007199254740992" {
		return "", false
	}
	return d, true
}

// numberJS is Number(s) when s, trimmed, is a non-decimal integer literal
// ("0x5", "0o5", "0b101": no sign, no separators); its decimal readings
// are parseInt's.
func numberJS(s string) (string, bool) {
	t := strings.TrimFunc(s, jsBlank)
	base := prefixBase(t)
	if base == 0 {
		return "", false
	}
	v, rest, ok := radix(t[2:], base, false)
	if !ok || rest != "" || v > maxSafe {
		return "", false
	}
	return strconv.FormatUint(v, 10), true
}

// pgInt8 is PostgreSQL 16+'s int8 input of a prefixed spelling
// (pg_strtoint64_safe): C blanks around it, a sign, "0x", "0o" or "0b",
// digits with single underscores, and nothing else.
func pgInt8(s string) (string, bool) {
	t := strings.Trim(s, cBlanks)
	neg := t != "" && t[0] == '-'
	t = unsign(t)
	base := prefixBase(t)
	if base == 0 {
		return "", false
	}
	v, rest, ok := radix(t[2:], base, true)
	if !ok || rest != "" || v > 1<<63-1 && !(neg && v == 1<<63) {
		return "", false
	}
	return strconv.FormatUint(v, 10), true
}

// prefixBase is the base t's "0x", "0o" or "0b" names, 0 for none.
func prefixBase(t string) int {
	if len(t) < 2 || t[0] != '0' {
		return 0
	}
	switch t[1] | 0x20 {
	case 'x':
		return 16
	case 'o':
		return 8
	case 'b':
		return 2
	}
	return 0
}

// radix reads the leading digits of t in base, with single underscores
// between (or, as PostgreSQL, before) them when underscores: their value,
// what follows them, and false when there is no digit or it overflows.
func radix(t string, base int, underscores bool) (v uint64, rest string, ok bool) {
	i := 0
	for i < len(t) {
		c := t[i]
		if c == '_' && underscores && i+1 < len(t) && digitIn(t[i+1], base) >= 0 {
			i++
			continue
		}
		d := digitIn(c, base)
		if d < 0 {
			break
		}
		if v > (1<<64-1-uint64(d))/uint64(base) {
			return 0, "", false
		}
		v = v*uint64(base) + uint64(d)
		ok = true
		i++
	}
	return v, t[i:], ok
}

func digitIn(c byte, base int) int {
	d := -1
	switch {
	case '0' <= c && c <= '9':
		d = int(c - '0')
	case 'a' <= c|0x20 && c|0x20 <= 'f':
		d = int(c|0x20-'a') + 10
	}
	if d >= base {
		return -1
	}
	return d
}

// pythonInt is Python's int(s): Unicode blanks around it, a sign, and
// Unicode decimal digits with single underscores between them, nothing
// else. Spellings of ASCII digits alone are MySQL's or Ruby's readings
// too; it is the reading of the others ("５", "\u00a05", "\u00851_0").
func pythonInt(s string) (string, bool) {
	t := unsign(strings.TrimFunc(s, pyBlank))
	if t == "" {
		return "", false
	}
	plain := true // ASCII digits alone: t itself is the decimal
	prev := '_'
	for _, r := range t {
		switch {
		case r == '_':
			if prev == '_' {
				return "", false
			}
			plain = false
		case '0' <= r && r <= '9':
		case r >= utf8.RuneSelf && decimal(r) >= 0:
			plain = false
		default:
			return "", false
		}
		prev = r
	}
	if prev == '_' {
		return "", false
	}
	if plain {
		return trimZeros(t), true
	}
	b := make([]byte, 0, len(t))
	for _, r := range t {
		if r != '_' {
			b = append(b, byte('0'+decimal(r)))
		}
	}
	return trimZeros(string(b)), true
}

// decimal is the value of the Unicode decimal digit r (category Nd),
// -1 for any other rune. Nd comes in runs of ten from a zero (Unicode's
// stability policy), so the value is the offset in its run.
func decimal(r rune) int {
	if r < utf8.RuneSelf {
		if '0' <= r && r <= '9' {
			return int(r - '0')
		}
		return -1
	}
	for _, rg := range unicode.Nd.R16 {
		if rune(rg.Lo) <= r && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10
		}
	}
	for _, rg := range unicode.Nd.R32 {
		if rune(rg.Lo) <= r && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10
		}
	}
	return -1
}
