package proxy

import (
	"net/http"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/httpcache"
)

// originFreshness is admit's reading of an answer on a freshness: origin
// route (RFC 9111 §3, §4.2), on the current-age axis of cache.Entry.
type originFreshness struct {
	shareable, cacheable, store bool
	ttl, swr, sie               time.Duration
	noStale                     bool
	strip                       []string
}

// originFreshness applies the origin's caching headers to one answer:
//
//   - storing (§3): not with no-store or an unqualified private (in the
//     selected field: an RFC 9213 targeted field replaces Cache-Control),
//     nor with Set-Cookie; the status must be one whose meaning a cache can
//     reuse: 200, 203, 204, 300, 301, 308; 404, 405, 410 and 414 with
//     explicit freshness or public, or under negative_ttl as their
//     heuristic; any
//     other final status below 500 (but 206 and 304) with explicit
//     freshness or public (§3, §4.2.2, §5.2.2.9);
//   - freshness (§4.2.1): s-maxage, then max-age, then Expires minus Date;
//     without any, the route's ttl when set, else §4.2.2's heuristic (10% of
//     the time since Last-Modified, at most a day); max_ttl caps the result;
//   - serving stale (§4.2.4): the response's stale-while-revalidate and
//     stale-if-error (RFC 5861), or the route's when longer; none at all
//     after must-revalidate, proxy-revalidate, s-maxage (§5.2.2.2, .8, .10)
//     or no-cache;
//   - qualified no-cache and private (§5.2.2.4, §5.2.2.7): the named
//     fields are removed from the stored response (and so from every
//     answer given from it, the first included);
//   - no-cache (§5.2.2.4): stored only when it carries a validator, with no
//     freshness, so every reuse is a conditional request to the origin; a
//     no-cache answer without validator is not stored (reusing it would
//     cost a full fetch anyway).
func (x *exchange) originFreshness(e *cache.Entry, upstream http.Header, now time.Time) originFreshness {
	rt := x.rs.rt
	f := httpcache.Evaluate(upstream, now, httpcache.Options{Targets: rt.Origin.Targets, Heuristic: rt.TTL})
	o := originFreshness{shareable: !f.NoStore && !f.Private && len(upstream.Values("Set-Cookie")) == 0}
	life := f.Lifetime
	switch e.Status {
	case 200, 203, 204, 300, 301, 308:
		o.cacheable = true
	case 404, 405, 410, 414:
		// Heuristically cacheable errors (RFC 9110 §15.1): the route's
		// negative_ttl is their heuristic.
		o.cacheable = f.Explicit || f.Public || rt.NegativeTTL > 0
		if !f.Explicit && !f.Public {
			life = rt.NegativeTTL
		}
	case 206, 304:
		// A part, or a 304 to a conditional the sidecar did not send:
		// neither is the resource (§3.3, §4.3.4).
	default:
		// Any other final status the origin marks cacheable (§3: explicit
		// freshness, or public for a heuristic one, §4.2.2); never a 5xx.
		o.cacheable = e.Status >= 200 && e.Status < 500 && (f.Explicit || f.Public)
	}
	if m := rt.Origin.MaxTTL; m > 0 {
		life = min(life, m)
	}
	if f.NoCache {
		life = 0
	}
	o.noStale = f.NoStale || f.NoCache
	if !o.noStale {
		o.swr = max(f.StaleWhileRevalidate, rt.StaleWhileRevalidate)
		o.sie = max(f.StaleIfError, rt.StaleIfError)
	}
	o.ttl = life
	o.strip = append(f.NoCacheFields, f.PrivateFields...)
	age := initialAge(upstream, e.StoredAt, now)
	// Worth storing while it can still answer: fresh, usable stale, or
	// revalidatable with a conditional request.
	o.store = life > age || life+max(o.swr, o.sie) > age || hasValidator(e.Header)
	return o
}

// initialAge is the age an answer already had when its request left
// (RFC 9111 §4.2.3): corrected_initial_age less the round trip, which the
// entry's own clock (from StoredAt, the request time) counts again.
func initialAge(h http.Header, requested, received time.Time) time.Duration {
	return max(httpcache.InitialAge(h, requested, received)-max(received.Sub(requested), 0), 0)
}

// hasValidator reports whether a stored header lets the entry be
// revalidated with a conditional request (RFC 9111 §4.3.1).
func hasValidator(h http.Header) bool {
	return h.Get("Etag") != "" || h.Get("Last-Modified") != ""
}

// The revalidation window: an entry with a validator stays stored past its
// freshness (and stale windows) for its freshness lifetime again, at least
// minKeep and at most maxKeep, so that a request after it went stale costs
// a 304 instead of a whole body (RFC 9111 §4.3). Bounded so that an
// upstream's validators cannot make entries live forever.
const (
	minKeep = 10 * time.Minute
	maxKeep = time.Hour
)

// keepFor is the revalidation window of an entry of header h and freshness
// lifetime life; 0 without a validator.
func keepFor(h http.Header, life time.Duration) time.Duration {
	if !hasValidator(h) {
		return 0
	}
	return min(max(life, minKeep), maxKeep)
}
