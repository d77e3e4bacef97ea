package httpcache

import (
	"net/http"
	"time"
)

// Origin is what a cache's own configuration adds to the origin's caching
// headers when the origin sets freshness (a route with freshness: origin).
type Origin struct {
	// Targets and Heuristic are Options' (nil Targets: DefaultTargets;
	// Heuristic 0: §4.2.2's Last-Modified heuristic).
	Targets   []string
	Heuristic time.Duration
	// Negative is the heuristic freshness of the heuristically cacheable
	// errors (404, 405, 410, 414); 0: not stored without explicit
	// freshness or public.
	Negative time.Duration
	// MaxTTL caps every freshness lifetime; 0: no cap.
	MaxTTL time.Duration
	// StaleWhileRevalidate and StaleIfError are the cache's own stale
	// windows, used when longer than the response's.
	StaleWhileRevalidate, StaleIfError time.Duration
}

// Storage is Origin.Storage's verdict on one response, on the current-age
// axis (see InitialAge): TTL is the freshness lifetime.
type Storage struct {
	// Shareable: the response may reach clients other than the one whose
	// request fetched it.
	Shareable bool
	// Cacheable: the status is one a cache may store (§3).
	Cacheable bool
	// Store: worth storing while it can still answer.
	Store bool

	TTL, StaleWhileRevalidate, StaleIfError time.Duration
	NoStale                                 bool
	// Strip are fields a shared cache must not keep: qualified no-cache
	// and private (§5.2.2.4, §5.2.2.7).
	Strip []string
}

// Storage applies the origin's caching headers to one response of the
// given status, upstream header and stored header (see StoredHeader),
// requested and received at the given times:
//
//   - storing (§3): not with no-store or an unqualified private (in the
//     selected field: an RFC 9213 targeted field replaces Cache-Control),
//     nor with Set-Cookie; the status must be one whose meaning a cache can
//     reuse: 200, 203, 204, 300, 301, 308; 404, 405, 410 and 414 with
//     explicit freshness or public, or under Negative as their heuristic;
//     any other final status below 500 (but 206 and 304) with explicit
//     freshness or public (§3, §4.2.2, §5.2.2.9);
//   - freshness (§4.2.1): s-maxage, then max-age, then Expires minus Date;
//     without any, Heuristic when set, else §4.2.2's heuristic (10% of the
//     time since Last-Modified, at most a day); MaxTTL caps the result;
//   - serving stale (§4.2.4): the response's stale-while-revalidate and
//     stale-if-error (RFC 5861), or the cache's when longer; none at all
//     after must-revalidate, proxy-revalidate, s-maxage (§5.2.2.2, .8, .10)
//     or no-cache;
//   - qualified no-cache and private (§5.2.2.4, §5.2.2.7): the named
//     fields are removed from the stored response (and so from every
//     answer given from it, the first included);
//   - no-cache (§5.2.2.4): stored only when it carries a validator, with no
//     freshness, so every reuse is a conditional request to the origin; a
//     no-cache answer without validator is not stored (reusing it would
//     cost a full fetch anyway).
func (o Origin) Storage(status int, upstream, stored http.Header, requested, received time.Time) Storage {
	f := Evaluate(upstream, received, Options{Targets: o.Targets, Heuristic: o.Heuristic})
	// A targeted no-store the targets do not select (targeted_fields:
	// [], or another field first present) still forbids storing
	// (TargetedNoStore).
	s := Storage{Shareable: !f.NoStore && !f.Private && !SetsCookie(upstream) && !TargetedNoStore(upstream)}
	life := f.Lifetime
	switch status {
	case 200, 203, 204, 300, 301, 308:
		s.Cacheable = true
	case 404, 405, 410, 414:
		// Heuristically cacheable errors (RFC 9110 §15.1): Negative is
		// their heuristic.
		s.Cacheable = f.Explicit || f.Public || o.Negative > 0
		if !f.Explicit && !f.Public {
			life = o.Negative
		}
	case 206, 304:
		// A part, or a 304 to a conditional the cache did not send:
		// neither is the resource (§3.3, §4.3.4).
	default:
		// Any other final status the origin marks cacheable (§3: explicit
		// freshness, or public for a heuristic one, §4.2.2); never a 5xx.
		s.Cacheable = status >= 200 && status < 500 && (f.Explicit || f.Public)
	}
	if o.MaxTTL > 0 {
		life = min(life, o.MaxTTL)
	}
	if f.NoCache {
		life = 0
	}
	s.NoStale = f.NoStale || f.NoCache
	if !s.NoStale {
		s.StaleWhileRevalidate = max(f.StaleWhileRevalidate, o.StaleWhileRevalidate)
		s.StaleIfError = max(f.StaleIfError, o.StaleIfError)
	}
	s.TTL = life
	s.Strip = append(f.NoCacheFields, f.PrivateFields...)
	age := AgeAtRequest(upstream, requested, received)
	// Worth storing while it can still answer: fresh, usable stale, or
	// revalidatable with a conditional request.
	s.Store = life > age || life+max(s.StaleWhileRevalidate, s.StaleIfError) > age || HasValidator(stored)
	return s
}
