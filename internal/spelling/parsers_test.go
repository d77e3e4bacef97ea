package spelling_test

import (
	"math"
	"math/big"
	"regexp"
	"strings"
	"unicode"
)

// The parsers AppendInts follows, each written from its own definition
// (not from AppendInts), for FuzzInts to hold it to: every integer each
// reads a spelling as, as a decimal without sign or leading zeros. A
// parser that reads no digits ("acme".to_i is 0, Number("") is 0) reads
// no integer. Cross-checked by hand against python3, node and PostgreSQL
// 16's documentation.
//
// Left out, and so not followed: Ruby's Kernel#Integer and C's strtol
// with base 0 read a leading 0 as octal ("010" is 8).

var (
	cBlank    = "[ \\t\\n\\v\\f\\r]*"
	mysqlRe   = regexp.MustCompile(`^` + cBlank + `[+-]?([0-9]+)`)
	rubyRe    = regexp.MustCompile(`^` + cBlank + `[+-]?(?:0[dD])?([0-9]+(?:_[0-9]+)*)`)
	jsHexRe   = regexp.MustCompile(`^[+-]?0[xX]([0-9a-fA-F]+)`)
	jsDecRe   = regexp.MustCompile(`^[+-]?([0-9]+)`)
	numberRe  = regexp.MustCompile(`^(?:0[xX]([0-9a-fA-F]+)|0[oO]([0-7]+)|0[bB]([01]+)|[+-]?([0-9]+))$`)
	pgRe      = regexp.MustCompile(`^` + cBlank + `([+-]?)(?:0[xX]((?:_?[0-9a-fA-F])+)|0[oO]((?:_?[0-7])+)|0[bB]((?:_?[01])+)|([0-9](?:_?[0-9])*))` + cBlank + `$`)
	pythonRe  = regexp.MustCompile(`^[+-]?([0-9]+(?:_[0-9]+)*)$`)
	decimalRe = regexp.MustCompile(`^([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+))?$`)
	leadRe    = regexp.MustCompile(`^` + cBlank + `([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)`)
	maxSafeJS = big.NewInt(1 << 53)
	maxInt8   = new(big.Int).SetUint64(1<<63 - 1)
)

// parsersRead is the set of integers the parsers read s as.
func parsersRead(s string) map[string]bool {
	out := map[string]bool{}
	add := func(digits string, base int, limit *big.Int) {
		v, ok := new(big.Int).SetString(strings.ReplaceAll(digits, "_", ""), base)
		if ok && (limit == nil || v.Cmp(limit) <= 0) {
			out[v.String()] = true
		}
	}
	// MySQL's CAST(s AS SIGNED) and string-to-integer conversion.
	if m := mysqlRe.FindStringSubmatch(s); m != nil {
		add(m[1], 10, nil)
	}
	// Ruby's String#to_i (Rails' find of an id that starts with a digit).
	if m := rubyRe.FindStringSubmatch(s); m != nil {
		add(m[1], 10, nil)
	}
	// parseInt(s): ECMA-262 §19.2.5, exact up to 2^53.
	js := strings.TrimLeftFunc(s, isJSBlank)
	if m := jsHexRe.FindStringSubmatch(js); m != nil {
		add(m[1], 16, maxSafeJS)
	} else if !strings.HasPrefix(strings.TrimLeft(js, "+-"), "0x") && !strings.HasPrefix(strings.TrimLeft(js, "+-"), "0X") {
		if m := jsDecRe.FindStringSubmatch(js); m != nil {
			add(m[1], 10, maxSafeJS)
		}
	}
	// Number(s): ECMA-262 §7.1.4.1, its integer literals.
	if m := numberRe.FindStringSubmatch(strings.TrimFunc(s, isJSBlank)); m != nil {
		for i, base := range [...]int{16, 8, 2, 10} {
			if m[i+1] != "" {
				add(m[i+1], base, maxSafeJS)
			}
		}
	}
	// Number(s) of a decimal with a fraction or an exponent (ECMA-262
	// §7.1.4.1 StrDecimalLiteral), MySQL's comparison of it with an
	// integer column (both the double nearest it, when an integer), and
	// PHP's (int) of it (that double truncated toward zero), within int64.
	addDecimal := func(t string) {
		if v, neg, ok := decimalValue(t); ok {
			limit := maxInt8
			if neg {
				limit = new(big.Int).Add(maxInt8, big.NewInt(1))
			}
			if v.Cmp(limit) <= 0 {
				out[v.String()] = true
			}
		}
	}
	addDecimal(strings.TrimFunc(s, isJSBlank))
	// MySQL's comparison and PHP's (int) of a string that starts with
	// such a number (strtod; PHP's leading-numeric string, since 7.1 with
	// its exponent): C blanks, the longest decimal literal in front, its
	// value as above; what follows is ignored ("5e2-acme" is 500).
	if m := leadRe.FindStringSubmatch(s); m != nil {
		addDecimal(m[1])
	}
	// PostgreSQL 16+'s int8 input.
	if m := pgRe.FindStringSubmatch(s); m != nil {
		limit := maxInt8
		if m[1] == "-" {
			limit = new(big.Int).Add(maxInt8, big.NewInt(1))
		}
		for i, base := range [...]int{16, 8, 2, 10} {
			if m[i+2] != "" {
				add(m[i+2], base, limit)
			}
		}
	}
	// Python's int(s): str.strip()ped, Unicode decimal digits.
	if m := pythonRe.FindStringSubmatch(asciiDigits(strings.TrimFunc(s, isPyBlank))); m != nil {
		add(m[1], 10, nil)
	}
	return out
}

// isJSBlank is StrWhiteSpaceChar (ECMA-262 §7.1.4.1): TAB, VT, FF,
// ZWNBSP, USP (category Zs), LF, CR, LS, PS.
func isJSBlank(r rune) bool {
	switch r {
	case '\t', '\v', '\f', 0xfeff, '\n', '\r', 0x2028, 0x2029:
		return true
	}
	return unicode.Is(unicode.Zs, r)
}

// isPyBlank is what int() strips (_PyUnicode_TransformDecimalAndSpaceToASCII
// then PyLong_FromString): past ASCII, str.isspace() (bidirectional class
// WS, B or S, or Zs); in ASCII, Py_ISSPACE, which leaves U+001C to U+001F
// that str.isspace() counts.
func isPyBlank(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r', 0x85, 0x2028, 0x2029:
		return true
	}
	return r > 0x7f && unicode.Is(unicode.Zs, r)
}

// asciiDigits maps each Unicode decimal digit of s to its ASCII digit
// (Python's _PyUnicode_TransformDecimalAndSpaceToASCII); a digit's value
// is its place in its run of ten, counted from the run's start.
func asciiDigits(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x80 || !unicode.IsDigit(r) {
			return r
		}
		k := 0
		for unicode.IsDigit(r - rune(k) - 1) {
			k++
		}
		return '0' + rune(k%10)
	}, s)
}

// decimalValue is the magnitude of t's nearest double truncated toward
// zero, and its sign, when t is a finite decimal literal with a fraction
// or an exponent: computed exactly (big.Rat) and rounded once, to
// nearest even, as strtod and ECMA-262's RoundMVResult do.
func decimalValue(t string) (*big.Int, bool, bool) {
	m := decimalRe.FindStringSubmatch(t)
	if m == nil || m[2]+m[3] == "" || !strings.ContainsAny(t, ".eE") {
		return nil, false, false
	}
	neg := m[1] == "-"
	digits := strings.TrimLeft(m[2]+m[3], "0")
	if digits == "" {
		return new(big.Int), neg, true
	}
	exp, ok := new(big.Int).SetString(strings.TrimPrefix(m[4], "+"), 10)
	if m[4] == "" {
		exp, ok = new(big.Int), true
	}
	if !ok {
		return nil, false, false
	}
	// The value is digits × 10^(exp - len(m[3])), of the order of
	// 10^(len(digits) + exp - len(m[3])): past 10^400 no double holds it,
	// below 10^-400 the nearest double is 0.
	scale := new(big.Int).Sub(exp, big.NewInt(int64(len(m[3]))))
	order := new(big.Int).Add(scale, big.NewInt(int64(len(digits))))
	switch {
	case order.Cmp(big.NewInt(400)) > 0:
		return nil, false, false
	case order.Cmp(big.NewInt(-400)) < 0:
		return new(big.Int), neg, true
	}
	r, _ := new(big.Rat).SetString(digits)
	p := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), new(big.Int).Abs(scale), nil))
	if scale.Sign() < 0 {
		r.Quo(r, p)
	} else {
		r.Mul(r, p)
	}
	f, _ := r.Float64()
	if math.IsInf(f, 0) {
		return nil, false, false
	}
	v, _ := new(big.Float).SetFloat64(f).Int(nil)
	return v, neg, true
}
