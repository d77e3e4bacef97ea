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
	return truncated(t)
}

// decimalPrefix is the integer MySQL's comparison of an integer column
// with a string and PHP's (int) read a spelling as when it starts with a
// number with a fraction or an exponent and goes on ("5e2-acme", "0.5e1-x",
// "50e-1-x"): both skip C blanks and read the longest decimal literal in
// front (strtod's: a sign, digits with a '.' among or around them, an
// exponent when digits follow its 'e'), ignoring the rest, so "5e2-acme"
// is 500 to them where Ruby's to_i and parseInt read 5. Its value as
// decimalJS gives it, when the literal holds a '.' or an exponent (its
// digits alone are MySQL's leading-digits reading).
func decimalPrefix(s string) (string, bool) {
	t := strings.TrimLeft(s, cBlanks)
	i := 0
	if i < len(t) && (t[i] == '+' || t[i] == '-') {
		i++
	}
	n := leadingDigits(t[i:])
	i += n
	marked := false
	if i < len(t) && t[i] == '.' {
		if f := leadingDigits(t[i+1:]); n+f > 0 {
			i, n, marked = i+1+f, n+f, true
		}
	}
	if n == 0 {
		return "", false
	}
	if i < len(t) && t[i]|0x20 == 'e' {
		j := i + 1
		if j < len(t) && (t[j] == '+' || t[j] == '-') {
			j++
		}
		if e := leadingDigits(t[j:]); e > 0 {
			i, marked = j+e, true
		}
	}
	if !marked {
		return "", false
	}
	return truncated(t[:i])
}

// truncated is the decimal literal t's nearest double truncated toward
// zero, without its sign, when it is finite and within int64.
func truncated(t string) (string, bool) {
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
// ASCII digits, may make it or its front a decimal literal
// (decimalLiteral, decimalPrefix): '.', 'e' or 'E' first. Anything else
// after digits is a slug's name.
func decimalTail(rest string) bool {
	return rest != "" && (rest[0] == '.' || rest[0]|0x20 == 'e')
}
