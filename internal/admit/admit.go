// Package admit is the one admission rule (docs/configuration.md,
// "Cacheable responses"; RFC 9111 §3): may an upstream answer be stored,
// may it reach clients other than the one whose request fetched it, and
// for how long is it fresh, servable stale and kept. Per-key fetches and
// bulk fetches both ask it, for a route in either freshness mode (the
// route's ttl, or the origin's Cache-Control and Expires). It is a pure
// rule over the answer, the route and the clock; storing is the caller's.
package admit

import (
	"net/http"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/forward"
	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/route"
)

// Admission is Decide's verdict on one upstream answer.
type Admission struct {
	// Shareable: the answer may reach clients other than the one whose
	// request fetched it (collapsed waiters included).
	Shareable bool
	Store     bool
	// Vary names the request headers that select this variant.
	Vary []string
	// The entry's freshness lifetime and stale windows, when Store, on
	// the current-age axis (see cache.Entry); Age is its initial age.
	TTL, SWR, SIE, Keep, Age time.Duration
	NoStale                  bool
	// Invalidated: Store was refused only because a write invalidated
	// the answer while it was on its way (Tombs), not for what the
	// answer is: the next fetch may well be stored.
	Invalidated bool
	// Strip are fields a shared cache must not reuse (qualified
	// no-cache and private, RFC 9111 §5.2.2.4, §5.2.2.7): set whenever
	// the answer is Shareable, stored or not, because a collapsed waiter
	// is another request reusing it as surely as a hit is (Withhold).
	Strip []string
}

// Apply gives e the lifetimes Decide chose for it, and withholds Strip.
func (a Admission) Apply(e *cache.Entry) {
	e.TTL, e.StaleWhileRevalidate, e.StaleIfError = a.TTL, a.SWR, a.SIE
	e.InitialAge, e.Keep, e.NoStale = a.Age, a.Keep, a.NoStale
	a.Withhold(e)
}

// Withhold removes the Strip fields from e's header (replacing it with a
// copy: the header may be shared, a bulk answer's with its elements). The
// caller does it before e reaches anyone, stored or not: an answer kept
// from the tiers (max-age=0, no-cache without a validator, over
// max_body_bytes with its header) still answers the requests collapsed
// onto its fetch, which are other clients' (RFC 9111 §5.2.2.4,
// §5.2.2.7). The fetching client loses the fields too, as it does when
// the answer is stored: one rule, whichever way the answer went.
func (a Admission) Withhold(e *cache.Entry) {
	cloned := false
	for _, k := range a.Strip {
		if _, ok := e.Header[k]; !ok {
			continue
		}
		if !cloned {
			e.Header, cloned = e.Header.Clone(), true
		}
		delete(e.Header, k)
	}
}

// Tombs tells whether an entry predates an invalidation of one of its
// tags (internal/tombstone): such an answer is served, never kept.
type Tombs interface {
	Stale(e *cache.Entry, now time.Time) bool
}

// Options are what Decide judges an answer by besides the answer itself.
type Options struct {
	Route *route.Route
	// MaxBody bounds what is kept: the body and the header block
	// together (max_body_bytes).
	MaxBody int64
	Tombs   Tombs
}

// Decide is the admission of e, an upstream answer: e carries its status,
// stored header, body, request time and tags, and is not changed (the
// caller applies the admission when it stores). upstream is the answer's
// header as received, hd what Decide reads of it alone (Hear), now the
// time it arrived. unkeyed reports that the answer may belong to another
// request than the one the key names: it varies on a header the request
// carried but its fetch did not send (the upstream answered another
// variant), or its fetch sent a header the route learned from another
// answer's Vary that this answer's Vary does not name
// (forward.Rules.SentUnvaried: it may have been shaped by a header no key
// holds).
func Decide(o *Options, e *cache.Entry, upstream http.Header, hd *Heard, unkeyed bool, now time.Time) Admission {
	rt := o.Route
	a := Admission{Shareable: !hd.Private, Age: hd.Age}
	var of httpcache.Storage
	if rt.Origin != nil {
		of = Origin(rt).Storage(e.Status, upstream, e.Header, e.StoredAt, now)
		a.Shareable, a.Strip = of.Shareable, of.Strip
	} else if hd.NoCache {
		// Not stored (below), yet shared with the collapsed requests: the
		// fields a qualified no-cache names are withheld from them.
		a.Strip = httpcache.Parse(upstream, "Cache-Control").NoCacheFields
	}
	negative, cacheable := httpcache.CacheableStatus(e.Status, rt.NegativeTTL)
	names := hd.Vary
	a.Vary = names
	if hd.Star {
		a.Shareable = false // Vary: * matches no other request (RFC 9110 §12.5.5)
	}
	if forward.VariesOnOwn(names) {
		// The answer varies on a header the sidecar wrote (the caller's
		// address in X-Forwarded-For, its own request id): no key holds
		// that value, so the answer is this client's alone.
		a.Shareable = false
	}
	if unkeyed {
		// Neither kept nor shared: the answer is its request's alone
		// (for a withheld header, the caller's fetch learns it and asks
		// again when it can).
		a.Shareable = false
	}
	if rt.Origin != nil {
		cacheable = of.Cacheable
	}
	if !cacheable || !a.Shareable || rt.Origin == nil && hd.NoCache {
		return a
	}
	// The header block counts: a huge header is as costly to keep as a
	// huge body.
	if int64(len(e.Body))+headerBytes(e, hd) > o.MaxBody {
		return a
	}
	switch {
	case rt.Origin != nil:
		a.TTL, a.SWR, a.SIE, a.NoStale = of.TTL, of.StaleWhileRevalidate, of.StaleIfError, of.NoStale
	case negative:
		// The route's lifetimes run from the fetch: on the age axis they
		// start at the age the answer arrived with.
		a.TTL = a.Age + rt.NegativeTTL
	default:
		a.TTL, a.SWR, a.SIE = a.Age+rt.TTL, rt.StaleWhileRevalidate, rt.StaleIfError
	}
	a.Keep = httpcache.KeepWindow(e.ETag() != "" || httpcache.HasValidator(e.Header), a.TTL-a.Age)
	a.Store = a.TTL > a.Age // fresh for a while
	if rt.Origin != nil {
		a.Store = of.Store
	}
	// Fetched before a write to it was invalidated: serve, never keep.
	if a.Store && o.Tombs.Stale(e, now) {
		a.Store, a.Invalidated = false, true
	}
	return a
}

// headerBytes is httpcache.HeaderBytes of e's header with its ETag, where
// e holds it outside the header (cache.Entry.SetETag); hd.HeaderBytes when
// the caller has measured the header.
func headerBytes(e *cache.Entry, hd *Heard) int64 {
	var n int64
	if hd.HeaderSized {
		n = hd.HeaderBytes
	} else {
		n = httpcache.HeaderBytes(e.Header)
	}
	if v := e.ETagField(); v != nil {
		n += int64(len("Etag") + len(v[0]) + 4)
	}
	return n
}

// Heard is what Decide reads of an upstream answer's header alone: the
// same for every element of a bulk answer, whose header each element's
// repeats (the caller works it out once per answer: parsing Date, Age,
// Cache-Control and Vary again for each of a hundred elements was a tenth
// of their cost).
type Heard struct {
	// Age is the age the answer had when its request left (RFC 9111
	// §4.2.3). It does not depend on when the answer arrived: the
	// apparent age grows with the arrival time exactly as the round
	// trip AgeAtRequest takes off does, so one arrival time serves
	// every element (but for the clamp at httpcache.MaxDelta, which an
	// answer dated 68 years ago reaches).
	Age     time.Duration
	Private bool // httpcache.Private: Set-Cookie, private or no-store
	// Vary and Star are cachekey.AnswerVary's; Vary is only read, by
	// every entry it is handed to.
	Vary    []string
	Star    bool
	NoCache bool // Cache-Control: no-cache (RFC 9111 §5.2.2.4)
	// HeaderBytes, when HeaderSized, is httpcache.HeaderBytes of the
	// entry's header (without its ETag when held outside, SetETag): the
	// stored elements of a bulk answer share one header map, which the
	// caller measures once rather than Decide walking it per element.
	HeaderBytes int64
	HeaderSized bool
}

// Hear works out Heard for an answer with header h, whose request left at
// requested and which arrived at received.
func Hear(h http.Header, requested, received time.Time) Heard {
	names, star := cachekey.AnswerVary(h)
	return Heard{
		Age:     httpcache.AgeAtRequest(h, requested, received),
		Private: httpcache.Private(h),
		Vary:    names, Star: star,
		NoCache: httpcache.HasDirective(h, "no-cache"),
	}
}

// Origin is the origin-freshness settings of rt, a freshness: origin
// route, for httpcache (RFC 9111 §3, §4.2; docs/configuration.md,
// "Freshness from the origin").
func Origin(rt *route.Route) httpcache.Origin {
	return httpcache.Origin{
		Targets: rt.Origin.Targets, Heuristic: rt.TTL, Negative: rt.NegativeTTL, MaxTTL: rt.Origin.MaxTTL,
		StaleWhileRevalidate: rt.StaleWhileRevalidate, StaleIfError: rt.StaleIfError,
	}
}
