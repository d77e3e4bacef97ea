package spelling

import (
	"math"
	"strconv"
	"strings"
)

// decimalJS is the integer a number spelled with a fraction or an
// exponent ("0.5e1", "50e-1", "5e2", "5.0") reads as: JavaScript's Number
// (ECMA-262 §7.1.4.1 StrDecimalLiteral, blanks around it) and MySQL's
// comparison of an integer column with a string (as doubles) read its
// value, an integer or nothing; PHP's (int) of a numeric string, since
// 7.1, its value truncated toward zero. Each reads the double nearest the
// spelling (strtod), so the one integer for all of them is that double's
// truncation, without its sign, when it is within int64. It reads nothing
// for a spelling without '.', 'e' or 'E' (an integer literal, the other
// parsers' business), or not finite.
func decimalJS(s string) (string, bool) {
	t, ok := decimalLiteral(s)
	if !ok {
		return "", false
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsInf(v, 0) {
		return "", false
	}
	neg := v < 0
	a := math.Trunc(math.Abs(v))
	if a >= 1<<63 && !(neg && a == 1<<63) {
		return "", false
	}
	return strconv.FormatUint(uint64(a), 10), true
}

// decimalLiteral is s, trimmed of JavaScript's blanks, when it is a
// StrDecimalLiteral other than Infinity that holds '.', 'e' or 'E': a
// sign, digits with a '.' among or around them, then an exponent.
func decimalLiteral(s string) (string, bool) {
	t := strings.TrimFunc(s, jsBlank)
	i := 0
	if i < len(t) && (t[i] == '+' || t[i] == '-') {
		i++
	}
	n := leadingDigits(t[i:])
	i += n
	dot := i < len(t) && t[i] == '.'
	if dot {
		i++
		f := leadingDigits(t[i:])
		i += f
		n += f
	}
	if n == 0 {
		return "", false
	}
	exp := i < len(t) && t[i]|0x20 == 'e'
	if exp {
		i++
		if i < len(t) && (t[i] == '+' || t[i] == '-') {
			i++
		}
		e := leadingDigits(t[i:])
		if e == 0 {
			return "", false
		}
		i += e
	}
	if i != len(t) || !dot && !exp {
		return "", false
	}
	return t, true
}

// decimalTail reports whether rest, what follows a spelling's leading
// ASCII digits, may make it a decimal literal (decimalLiteral): '.',
// 'e' or 'E' first. Anything else after digits is a slug's name.
func decimalTail(rest string) bool {
	return rest != "" && (rest[0] == '.' || rest[0]|0x20 == 'e')
}
