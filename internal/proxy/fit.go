package proxy

import (
	"net/http"
	"slices"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/forward"
	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/route"
)

// need is how fresh an entry must be to answer.
type need uint8

const (
	// needAny: a response fetched for this very flight; its freshness is
	// moot (an uncacheable answer still answers the request that fetched it).
	needAny need = iota
	needFresh
	// needRevalidate: fresh, or stale within stale-while-revalidate.
	needRevalidate
	// needIfError: within stale-if-error (the upstream just failed).
	needIfError
)

// answers is the one fit rule (RFC 9111 §4): may c answer x's request? It
// applies to every entry about to be served — an L1 or L2 hit, a collapsed
// flight's result, a stale-while-revalidate or stale-if-error copy — so no
// path can hand out another variant (§4.1), a content-coding the client did
// not accept (RFC 9110 §12.5.3), a response private to another client, or
// an answer that predates an invalidation of one of its tags.
func (x *exchange) answers(c candidate, n need) bool {
	e := c.e
	if e == nil || c.private || e.IsVariants() {
		return false
	}
	now := x.h.now()
	switch n {
	case needFresh:
		if !x.freshEnough(e, now) {
			return false
		}
	case needRevalidate:
		if !x.freshEnough(e, now) && (x.wantsFresher() || !e.WithinStaleWhileRevalidate(now)) {
			return false
		}
	case needIfError:
		if !e.WithinStaleIfError(now) {
			return false
		}
	}
	if len(c.vary) > 0 {
		// Another variant, unless only the coding differs: a variant in
		// any coding the client accepts answers it (AcceptsStored below),
		// so a stored identity answer serves every client.
		coding, ok := entryCoding(e)
		if !ok && slices.Contains(c.vary, "Accept-Encoding") || x.variantKeyIn(c.vary, coding) != c.vkey {
			return false
		}
	}
	return cachekey.AcceptsStored(x.r.Header, e.Header) && !x.h.tombs.Stale(e, now)
}

// admission is admit's verdict on one upstream answer.
type admission struct {
	// shareable: the answer may reach clients other than the one whose
	// request fetched it (collapsed waiters included).
	shareable bool
	store     bool
	// vary names the request headers that select this variant.
	vary []string
	// The entry's freshness lifetime and stale windows, when store, on
	// the current-age axis (see cache.Entry); age is its initial age.
	ttl, swr, sie, keep, age time.Duration
	noStale                  bool
	// strip are fields a shared cache must not keep (origin mode:
	// qualified no-cache and private, RFC 9111 §5.2.2.4, §5.2.2.7).
	strip []string
}

// apply gives e the lifetimes admit chose for it.
func (a admission) apply(e *cache.Entry) {
	e.TTL, e.StaleWhileRevalidate, e.StaleIfError = a.ttl, a.swr, a.sie
	e.InitialAge, e.Keep, e.NoStale = a.age, a.keep, a.noStale
	if len(a.strip) > 0 {
		e.Header = e.Header.Clone()
		for _, k := range a.strip {
			delete(e.Header, k)
		}
	}
}

// admit is the one admission rule (docs/configuration.md, "Cacheable responses"; RFC 9111
// §3): may this upstream answer be stored, and for how long. Per-key fetches
// and bulk fetches both call it. e carries the answer's status, stored
// header, body, request time and tags; admit does not change it (the
// caller applies the admission when it stores).
//
// hd is what admit reads of upstream alone (heard), when the caller worked
// it out already; nil: admit works it out.
func (x *exchange) admit(e *cache.Entry, upstream http.Header, hd *heard) admission {
	rt := x.rs.rt
	now := x.h.now()
	if hd == nil {
		h := hear(upstream, e.StoredAt, now)
		hd = &h
	}
	a := admission{shareable: !hd.private, age: hd.age}
	var of httpcache.Storage
	if rt.Origin != nil {
		of = originOf(rt).Storage(e.Status, upstream, e.Header, e.StoredAt, now)
		a.shareable = of.Shareable
	}
	negative, cacheable := httpcache.CacheableStatus(e.Status, rt.NegativeTTL)
	names := hd.vary
	a.vary = names
	if hd.star {
		a.shareable = false // Vary: * matches no other request (RFC 9110 §12.5.5)
	}
	if forward.VariesOnOwn(names) {
		// The answer varies on a header the sidecar wrote (the caller's
		// address in X-Forwarded-For, its own request id): no key holds
		// that value, so the answer is this client's alone.
		a.shareable = false
	}
	if x.sentWithout(names) {
		// The answer varies on a header this request carried but its
		// fetch did not send: the upstream answered another variant
		// than the one the key names. Neither kept nor shared (fetch
		// learns the header and asks again when it can).
		a.shareable = false
	}
	if rt.Origin != nil {
		cacheable = of.Cacheable
	}
	if !cacheable || !a.shareable || rt.Origin == nil && hd.noCache {
		return a
	}
	// The header block counts: a huge header is as costly to keep as a
	// huge body.
	if int64(len(e.Body))+httpcache.HeaderBytes(e.Header) > x.h.maxBody {
		return a
	}
	switch {
	case rt.Origin != nil:
		a.ttl, a.swr, a.sie, a.noStale, a.strip = of.TTL, of.StaleWhileRevalidate, of.StaleIfError, of.NoStale, of.Strip
	case negative:
		// The route's lifetimes run from the fetch: on the age axis they
		// start at the age the answer arrived with.
		a.ttl = a.age + rt.NegativeTTL
	default:
		a.ttl, a.swr, a.sie = a.age+rt.TTL, rt.StaleWhileRevalidate, rt.StaleIfError
	}
	a.keep = httpcache.KeepFor(e.Header, a.ttl-a.age)
	a.store = a.ttl > a.age // fresh for a while
	if rt.Origin != nil {
		a.store = of.Store
	}
	// Fetched before a write to it was invalidated: serve, never keep.
	a.store = a.store && !x.h.tombs.Stale(e, now)
	return a
}

// heard is what admit reads of an upstream answer's header alone: the
// same for every element of a bulk answer, whose header each element's
// repeats (elementHeads works it out once per answer: parsing Date, Age,
// Cache-Control and Vary again for each of a hundred elements was a tenth
// of their cost), and worked out by admit itself for a per-ID answer.
type heard struct {
	// age is the age the answer had when its request left (RFC 9111
	// §4.2.3). It does not depend on when the answer arrived: the
	// apparent age grows with the arrival time exactly as the round
	// trip AgeAtRequest takes off does, so one arrival time serves
	// every element (but for the clamp at httpcache.MaxDelta, which an
	// answer dated 68 years ago reaches).
	age     time.Duration
	private bool // httpcache.Private: Set-Cookie, private or no-store
	// vary and star are cachekey.AnswerVary's; vary is only read, by
	// every entry it is handed to.
	vary    []string
	star    bool
	noCache bool // Cache-Control: no-cache (RFC 9111 §5.2.2.4)
}

// hear works out heard for an answer with header h, whose request left at
// requested and which arrived at received.
func hear(h http.Header, requested, received time.Time) heard {
	names, star := cachekey.AnswerVary(h)
	return heard{
		age:     httpcache.AgeAtRequest(h, requested, received),
		private: httpcache.Private(h),
		vary:    names, star: star,
		noCache: httpcache.HasDirective(h, "no-cache"),
	}
}

// passVariant remembers that the variant of this request an upstream
// answer with header h is, was too large to keep (hit-for-pass, Varnish's
// name), until the given time. Hit-for-pass is per variant: a URL whose
// identity body is over max_body_bytes and whose gzip body fits is still
// cached for the clients that accept gzip. Both the variant the answer is
// (its coding) and the one this client asked for are remembered: an
// origin that answered a gzip client uncompressed will again.
func (x *exchange) passVariant(h http.Header, until time.Time) {
	names, star := cachekey.AnswerVary(h)
	if star || len(names) == 0 {
		x.h.hfp.Add(x.key, until)
		return
	}
	x.h.hfp.AddVary(x.key, names, until)
	x.h.hfp.Add(x.variantKeyIn(names, x.askedCoding()), until)
	if coding, ok := cachekey.StoredCoding(h.Get("Content-Encoding")); ok {
		x.h.hfp.Add(x.variantKeyIn(names, coding), until)
	}
}

// passes reports whether the variant this request asks for is remembered
// as too large to keep (passVariant).
func (x *exchange) passes() bool {
	on, vary := x.h.hfp.Lookup(x.key, x.start)
	if on && vary != nil {
		on = x.h.hfp.Active(x.variantKeyIn(vary, x.askedCoding()), x.start)
	}
	return on
}

// askedCoding is the coding of the variant this request's fetch asks the
// origin for first: the best one it accepts of those a variant may be
// stored in, whichever the origin has used so far (variantKey looks only
// among those, so a gzip client reads an identity variant until the origin
// has answered in gzip once).
func (x *exchange) askedCoding() string {
	every := cachekey.Codings(0).With("gzip").With("br").With("zstd")
	return cachekey.VariantCoding(x.r.Header["Accept-Encoding"], every)
}

// originOf is the origin-freshness settings of rt, a freshness: origin
// route, for httpcache (RFC 9111 §3, §4.2; docs/configuration.md,
// "Freshness from the origin").
func originOf(rt *route.Route) httpcache.Origin {
	return httpcache.Origin{
		Targets: rt.Origin.Targets, Heuristic: rt.TTL, Negative: rt.NegativeTTL, MaxTTL: rt.Origin.MaxTTL,
		StaleWhileRevalidate: rt.StaleWhileRevalidate, StaleIfError: rt.StaleIfError,
	}
}
