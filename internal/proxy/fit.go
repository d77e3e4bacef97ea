package proxy

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cachekey"
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
		if !e.Fresh(now) {
			return false
		}
	case needRevalidate:
		if !e.WithinStaleWhileRevalidate(now) {
			return false
		}
	case needIfError:
		if !e.WithinStaleIfError(now) {
			return false
		}
	}
	if len(c.vary) > 0 && x.variantKey(c.vary) != c.vkey {
		return false
	}
	return acceptsEncoding(x.r, e.Header) && !x.h.tombs.Stale(e, now)
}

// acceptsEncoding guards against an upstream that compresses without
// saying Vary: a stored body in a content-coding the client did not accept
// is never served to it (RFC 9110 §12.5.3).
func acceptsEncoding(r *http.Request, h http.Header) bool {
	ce := h.Get("Content-Encoding")
	if ce == "" {
		return true
	}
	return cachekey.AcceptsEncoding(cachekey.NormalizeAcceptEncoding(r.Header.Get("Accept-Encoding")), ce)
}

// admission is admit's verdict on one upstream answer.
type admission struct {
	// shareable: the answer may reach clients other than the one whose
	// request fetched it (collapsed waiters included).
	shareable bool
	store     bool
	// vary names the request headers that select this variant.
	vary []string
	// The entry's freshness lifetime and stale windows, when store.
	ttl, swr, sie time.Duration
}

// apply gives e the lifetimes admit chose for it.
func (a admission) apply(e *cache.Entry) {
	e.TTL, e.StaleWhileRevalidate, e.StaleIfError = a.ttl, a.swr, a.sie
}

// admit is the one admission rule (docs/configuration.md, "Cacheable responses"; RFC 9111
// §3): may this upstream answer be stored, and for how long. Per-key fetches
// and bulk fetches both call it. e carries the answer's status, stored
// header, body, request time and tags; admit does not change it (the
// caller applies the admission when it stores).
func (x *exchange) admit(e *cache.Entry, upstream http.Header) admission {
	rt := x.rs.rt
	a := admission{shareable: !private(upstream)}
	negative, cacheable := cacheableStatus(e.Status, rt.NegativeTTL)
	names, star := cachekey.ParseVary(upstream)
	if ce := upstream.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") && !slices.Contains(names, "Accept-Encoding") {
		// Compressed without saying so in Vary: store it as the variant it
		// is (RFC 9110 §12.5.3), so other clients never receive it.
		names = append(names, "Accept-Encoding")
		slices.Sort(names)
	}
	a.vary = names
	if star {
		a.shareable = false // Vary: * matches no other request (RFC 9110 §12.5.5)
	}
	if x.rs.fwd.withheld(x.r, names) {
		// The answer varies on a header this request carried but the
		// sidecar did not forward: the upstream answered another variant
		// than the one the key names. Neither kept nor shared (fetch
		// learns the header and asks again when it can).
		a.shareable = false
	}
	if !cacheable || !a.shareable || cacheControlHas(upstream, "no-cache") {
		return a
	}
	// The header block counts: a huge header is as costly to keep as a
	// huge body.
	if int64(len(e.Body))+headerBytes(e.Header) > x.h.maxBody {
		return a
	}
	if negative {
		a.ttl = rt.NegativeTTL
	} else {
		a.ttl, a.swr, a.sie = rt.TTL, rt.StaleWhileRevalidate, rt.StaleIfError
	}
	// Fetched before a write to it was invalidated: serve, never keep.
	a.store = a.ttl > 0 && !x.h.tombs.Stale(e, x.h.now())
	return a
}

func headerBytes(h http.Header) int64 {
	var n int64
	for k, vs := range h {
		for _, v := range vs {
			n += int64(len(k) + len(v) + 4) // "k: v\r\n"
		}
	}
	return n
}

// markerFor is the variants marker stored under the primary key of a
// response that varies: it says which request headers pick the variant.
func markerFor(e *cache.Entry, names []string) *cache.Entry {
	return &cache.Entry{Variants: names, StoredAt: e.StoredAt, TTL: e.TTL,
		StaleWhileRevalidate: e.StaleWhileRevalidate, StaleIfError: e.StaleIfError, Tags: e.Tags}
}
