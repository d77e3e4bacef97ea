// Package httpcache holds the rules of HTTP caching a shared cache applies
// to one response or request, as pure functions of header fields and
// times: Cache-Control parsing (RFC 9111 §5.2), freshness lifetime
// (§4.2.1, with RFC 9213 targeted fields), the heuristic (§4.2.2), current
// age (§4.2.3) and the RFC 5861 stale extensions (freshness.go); whether a
// response may be stored and for how long when the origin sets freshness
// (§3, origin.go); which requests skip the cache, ask for a refresh or are
// answered 304 (RFC 9110 §13, request.go); which fields a stored response
// keeps (hop-by-hop, RFC 9110 §7.6.1) and the revalidation window
// (response.go); conditional requests and freshening upon a 304 (§4.3,
// validation.go); the Cache-Status member (RFC 9211, cachestatus.go).
//
// It reads nothing but its arguments and imports only the standard
// library, so the proxy and tests can share one reading of the RFCs.
package httpcache

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxDelta is the largest delta-seconds a cache must represent; larger
// values and overflows read as this (RFC 9111 §1.2.2).
const MaxDelta = 2147483648 * time.Second

// Delta is an optional delta-seconds argument (max-age=60). Set is false
// when the directive is absent.
type Delta struct {
	Set bool
	D   time.Duration
}

// Directives are the Cache-Control directives a shared cache acts on, from
// a response (§5.2.2) or a request (§5.2.1). Unknown directives are
// ignored (§5.2.3); for a directive given twice the first occurrence
// counts (§4.2.1: "the first occurrence should be used").
type Directives struct {
	// Response directives.
	NoStore       bool
	NoCache       bool // unqualified, or with a field list (see NoCacheFields)
	NoCacheFields []string
	Private       bool // unqualified, or with a field list (see PrivateFields)
	PrivateFields []string
	// NoCacheAll and PrivateAll: the directive was given unqualified too,
	// so it covers the whole response whatever fields another occurrence
	// names (`private, private="X"` is private).
	NoCacheAll, PrivateAll bool
	Public                 bool
	MustRevalidate         bool
	ProxyRevalidate        bool
	Immutable              bool
	MaxAge                 Delta
	SMaxAge                Delta
	// RFC 5861 §3 and §4 (both also valid in requests for stale-if-error).
	StaleWhileRevalidate Delta
	StaleIfError         Delta

	// Request directives.
	MaxStale     Delta // Set with D == MaxDelta when given without a value
	MinFresh     Delta
	OnlyIfCached bool

	// Any reports whether at least one directive was read.
	Any bool
}

// Parse reads every line of the Cache-Control-like field name in h.
func Parse(h http.Header, name string) Directives {
	var d Directives
	for _, line := range h.Values(name) {
		d.parseLine(line)
	}
	return d
}

// ParseValue reads one field value.
func ParseValue(v string) Directives {
	var d Directives
	d.parseLine(v)
	return d
}

// parseLine splits a list of directives, each token [ "=" ( token /
// quoted-string ) ], tolerating junk: an element that is not a directive
// is skipped, a quoted string may hold commas, and a missing closing quote
// ends the value at the end of the line. An element spelt with other
// separators than commas still names the directives that keep an answer
// private (strays).
func (d *Directives) parseLine(s string) {
	for i := 0; i < len(s); {
		// name
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == ',') {
			i++
		}
		start := i
		for i < len(s) && s[i] != '=' && s[i] != ',' {
			i++
		}
		name := strings.TrimSpace(s[start:i])
		var arg string
		hasArg := false
		if i < len(s) && s[i] == '=' {
			hasArg = true
			i++
			for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
				i++
			}
			if i < len(s) && s[i] == '"' {
				var b strings.Builder
				i++
				for i < len(s) && s[i] != '"' {
					if s[i] == '\\' && i+1 < len(s) {
						i++
					}
					b.WriteByte(s[i])
					i++
				}
				i++ // the closing quote
				arg = b.String()
				start := i
				for i < len(s) && s[i] != ',' {
					i++ // junk after a quoted string
				}
				if start < i {
					d.strays(s[start:i]) // `no-cache="Set-Cookie";private`
				}
			} else {
				start := i
				for i < len(s) && s[i] != ',' {
					i++
				}
				arg = strings.TrimSpace(s[start:i])
				// "max-age=60 private", "max-age=0;no-store": the words
				// past the argument's first (which stays the argument,
				// invalid, as it was).
				if _, rest := splitWord(arg); rest != "" {
					d.strays(rest)
				}
			}
		}
		if !isToken(name) {
			// "private; max-age=0", "no-cache; no-store", "no-store;":
			// a name that is no token names no directive, but its
			// words are strays.
			d.strays(name)
		}
		if name != "" {
			d.set(strings.ToLower(name), arg, hasArg)
		}
	}
}

// Stray directives.
//
// An application that writes "Cache-Control: private; max-age=0",
// "max-age=60 private" or "no-cache; no-store" means its answer private
// or not to be stored, though a ";" or a blank is no list separator
// (RFC 9110 §5.6.1): NGINX finds "private", "no-store" and "no-cache"
// anywhere in the field (ngx_http_upstream_process_cache_control), and
// Varnish's built-in VCL matches them as a regular expression on it, so
// neither stores such an answer. A word of a directive name that is no
// token, or of an unquoted argument past its first, or after a quoted
// one (a stray) is read for those three alone, unqualified; the element
// is read as before, an unknown directive or an invalid argument. Strict
// for storage: the spelling never makes an answer more cacheable (a
// stray "public" or "max-age" sets nothing), so an answer its app meant
// for one client is never shared because of its spelling.

// strays sets the restrictive directives among the words of s.
func (d *Directives) strays(s string) {
	for s != "" {
		var w string
		w, s = splitWord(s)
		switch strings.ToLower(w) {
		case "no-store":
			d.Any, d.NoStore = true, true
		case "private":
			d.Any, d.Private, d.PrivateAll = true, true, true
		case "no-cache":
			d.Any, d.NoCache, d.NoCacheAll = true, true, true
		}
	}
}

// splitWord returns the first word of s (a run of tchar, RFC 9110 §5.6.2,
// after any other bytes) and what follows it.
func splitWord(s string) (word, rest string) {
	i := 0
	for i < len(s) && !isTchar(s[i]) {
		i++
	}
	k := i
	for k < len(s) && isTchar(s[k]) {
		k++
	}
	j := k
	for j < len(s) && !isTchar(s[j]) {
		j++
	}
	return s[i:k], s[j:]
}

// isToken reports whether s is a token (RFC 9110 §5.6.2): one or more
// tchar.
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) {
			return false
		}
	}
	return s != ""
}

// isTchar is RFC 9110 §5.6.2's tchar.
func isTchar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func (d *Directives) set(name, arg string, hasArg bool) {
	d.Any = true
	switch name {
	case "no-store":
		d.NoStore = true
	case "no-cache":
		if hasArg && arg != "" {
			d.NoCacheFields = append(d.NoCacheFields, fieldList(arg)...)
		} else {
			d.NoCacheAll = true
		}
		d.NoCache = true
	case "private":
		if hasArg && arg != "" {
			d.PrivateFields = append(d.PrivateFields, fieldList(arg)...)
		} else {
			d.PrivateAll = true
		}
		d.Private = true
	case "public":
		d.Public = true
	case "must-revalidate":
		d.MustRevalidate = true
	case "proxy-revalidate":
		d.ProxyRevalidate = true
	case "immutable":
		d.Immutable = true
	case "only-if-cached":
		d.OnlyIfCached = true
	case "max-age":
		setDelta(&d.MaxAge, arg, hasArg, 0)
	case "s-maxage":
		setDelta(&d.SMaxAge, arg, hasArg, 0)
	case "stale-while-revalidate":
		setDelta(&d.StaleWhileRevalidate, arg, hasArg, 0)
	case "stale-if-error":
		setDelta(&d.StaleIfError, arg, hasArg, 0)
	case "min-fresh":
		setDelta(&d.MinFresh, arg, hasArg, 0)
	case "max-stale":
		// Without a value the client accepts a stale response of any age
		// (§5.2.1.2).
		setDelta(&d.MaxStale, arg, hasArg, MaxDelta)
	}
}

// setDelta keeps the first occurrence. A value that is not delta-seconds
// reads as missing (fallback): for max-age and s-maxage that is 0, the
// most restrictive reading (§4.2.1: conflicting or invalid freshness
// information makes a response stale, never fresher).
func setDelta(dst *Delta, arg string, hasArg bool, missing time.Duration) {
	if dst.Set {
		return
	}
	dst.Set = true
	if !hasArg {
		dst.D = missing
		return
	}
	dst.D = parseDelta(arg)
}

// parseDelta reads 1*DIGIT (§1.2.2); anything else is 0, overflow is
// MaxDelta.
func parseDelta(s string) time.Duration {
	if s == "" {
		return 0
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > uint64(MaxDelta/time.Second) {
		return MaxDelta
	}
	return time.Duration(n) * time.Second
}

func fieldList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, http.CanonicalHeaderKey(f))
		}
	}
	return out
}
