package httpcache

import (
	"net/http"
	"strings"
	"time"
)

// DefaultTargets are the targeted cache-control fields (RFC 9213) a
// sidecar obeys by default, in precedence order: CDN-Cache-Control, then
// the Edge Architecture's Surrogate-Control. Either, when present with a
// valid value, replaces Cache-Control and Expires for this cache.
var DefaultTargets = []string{"CDN-Cache-Control", "Surrogate-Control"}

// HeuristicFraction and HeuristicCap bound the Last-Modified heuristic
// (RFC 9111 §4.2.2: "no more than some fraction of the interval since"
// the last modification; 10% is the typical setting it names, and a day
// keeps a years-old Last-Modified from pinning an entry for a month).
const (
	HeuristicFraction = 10
	HeuristicCap      = 24 * time.Hour
)

// Options are a cache's own settings for Evaluate.
type Options struct {
	// Targets are the targeted fields to obey, in precedence order; nil
	// means DefaultTargets, an empty non-nil slice none.
	Targets []string
	// Heuristic is the freshness lifetime of a response without explicit
	// freshness; 0 means §4.2.2's heuristic from Last-Modified.
	Heuristic time.Duration
}

// Freshness is what one response's header says a shared cache may do
// with it.
type Freshness struct {
	// Lifetime is the freshness lifetime (§4.2.1), or the heuristic one
	// when Explicit is false.
	Lifetime time.Duration
	// Explicit: s-maxage, max-age or Expires gave Lifetime.
	Explicit bool
	// StaleWhileRevalidate and StaleIfError are RFC 5861's windows, zero
	// when NoStale forbids serving stale.
	StaleWhileRevalidate, StaleIfError time.Duration
	// NoStale: must-revalidate, proxy-revalidate or s-maxage — once
	// stale, the response is reused only after a successful validation
	// (§5.2.2.2, §5.2.2.8, §5.2.2.10).
	NoStale bool
	// NoCache: unqualified no-cache — every reuse needs a validation
	// (§5.2.2.4). A qualified no-cache (with field names) is not a reason
	// to refuse the response (§5.2.2.4: the named fields are not reused;
	// the cache strips them, see NoCacheFields).
	NoCache       bool
	NoCacheFields []string
	// NoStore and Private: a shared cache must not store (§5.2.2.5,
	// §5.2.2.7; a qualified private names fields only, see PrivateFields).
	NoStore       bool
	Private       bool
	PrivateFields []string
	// Public: the response says public (§5.2.2.9), which makes it
	// cacheable with a heuristic freshness whatever its status (§4.2.2).
	Public bool
	// Field is the field the directives came from: Cache-Control or the
	// targeted field that replaced it.
	Field string
}

// Select returns the directives this cache obeys: those of the first
// target field present with a valid value (RFC 9213 §2.1), else
// Cache-Control's.
func Select(h http.Header, targets []string) (Directives, string) {
	if targets == nil {
		targets = DefaultTargets
	}
	for _, f := range targets {
		if len(h.Values(f)) == 0 {
			continue
		}
		if d := Parse(h, f); d.Any {
			return d, f
		}
	}
	return Parse(h, "Cache-Control"), "Cache-Control"
}

// Evaluate reads a response header. received is when the response
// arrived: it stands in for a missing or invalid Date (RFC 9110 §6.6.1).
func Evaluate(h http.Header, received time.Time, opts Options) Freshness {
	d, field := Select(h, opts.Targets)
	f := Freshness{
		NoCache: d.NoCacheAll, NoCacheFields: d.NoCacheFields,
		NoStore: d.NoStore,
		Private: d.PrivateAll, PrivateFields: d.PrivateFields,
		NoStale: d.MustRevalidate || d.ProxyRevalidate || d.SMaxAge.Set,
		Public:  d.Public,
		Field:   field,
	}
	date := dateOf(h, received)
	switch {
	case d.SMaxAge.Set:
		f.Lifetime, f.Explicit = d.SMaxAge.D, true
	case d.MaxAge.Set:
		f.Lifetime, f.Explicit = d.MaxAge.D, true
	case field == "Cache-Control" && len(h.Values("Expires")) > 0:
		// An invalid Expires ("0" included) is in the past (§5.3); so are
		// several (§4.2.1: the response may be considered stale).
		f.Explicit = true
		if vs := h.Values("Expires"); len(vs) == 1 {
			if t, err := ParseDate(strings.TrimSpace(vs[0])); err == nil && t.After(date) {
				f.Lifetime = t.Sub(date)
			}
		}
	default:
		f.Lifetime = Heuristic(h, date, opts.Heuristic)
	}
	if !f.NoStale {
		f.StaleWhileRevalidate = d.StaleWhileRevalidate.D
		f.StaleIfError = d.StaleIfError.D
	}
	return f
}

// Heuristic is the freshness lifetime of a response without explicit
// freshness (§4.2.2): fixed when the cache is configured with one, else a
// tenth of the time since Last-Modified, capped at HeuristicCap; 0 when
// there is no Last-Modified to go by.
func Heuristic(h http.Header, date time.Time, fixed time.Duration) time.Duration {
	if fixed > 0 {
		return fixed
	}
	lm, err := ParseDate(h.Get("Last-Modified"))
	if err != nil || !lm.Before(date) {
		return 0
	}
	return min(date.Sub(lm)/HeuristicFraction, HeuristicCap)
}

// dateOf is the response's Date, or received when it has none that parses.
func dateOf(h http.Header, received time.Time) time.Time {
	if t, err := ParseDate(h.Get("Date")); err == nil {
		return t
	}
	return received
}

// InitialAge is the age a response already had when it arrived, the
// corrected_initial_age of RFC 9111 §4.2.3: the larger of the apparent age
// (arrival minus Date) and the upstream's Age plus the round trip. Both
// are kept because either clock may be wrong; a cache that drops the Age
// of the caches before it keeps copies fresh for too long.
func InitialAge(h http.Header, requested, received time.Time) time.Duration {
	delay := max(received.Sub(requested), 0)
	corrected := AgeValue(h) + delay
	apparent := time.Duration(0)
	if t, err := ParseDate(h.Get("Date")); err == nil {
		apparent = max(received.Sub(t), 0)
	}
	return min(max(apparent, corrected), MaxDelta)
}

// AgeValue is the upstream's Age field (RFC 9111 §5.1), 0 when absent or
// not delta-seconds. Of several lines the first counts.
func AgeValue(h http.Header) time.Duration {
	vs := h.Values("Age")
	if len(vs) == 0 {
		return 0
	}
	v, _, _ := strings.Cut(vs[0], ",")
	return parseDelta(strings.TrimSpace(v))
}

// Acceptable applies a request's directives (§5.2.1) to a stored response
// of the given current age and freshness lifetime. noStale is the
// response's own ban on serving it stale (must-revalidate and friends),
// which a client's max-stale cannot lift (§5.2.2.2).
func Acceptable(req Directives, age, lifetime time.Duration, noStale bool) bool {
	if req.MaxAge.Set && age > req.MaxAge.D {
		return false
	}
	if req.MinFresh.Set && lifetime-age < req.MinFresh.D {
		return false
	}
	if age < lifetime {
		return true
	}
	return req.MaxStale.Set && !noStale && age-lifetime <= req.MaxStale.D
}
