package proxy

import (
	"net/http"
	"slices"
	"time"

	"github.com/sidecache/sidecache/internal/admit"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/fit"
)

// need is how fresh an entry must be to answer (internal/fit).
type need = fit.Need

const (
	needAny        = fit.Any
	needFresh      = fit.Fresh
	needRevalidate = fit.Revalidate
	needIfError    = fit.IfError
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
	if n != needAny && !fit.Enough(e, n, x.freshDirectives(), now) {
		return false
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

// admission is admit's verdict on one upstream answer (internal/admit).
type admission = admit.Admission

// heard is what admit reads of an upstream answer's header alone
// (admit.Heard): worked out once per bulk answer for all its elements
// (elementHeads), and by admit itself for a per-ID answer.
type heard = admit.Heard

// hear works out heard for an answer with header h, whose request left at
// requested and which arrived at received.
func hear(h http.Header, requested, received time.Time) heard {
	return admit.Hear(h, requested, received)
}

// admit is the one admission rule (internal/admit) for e, an upstream
// answer to x's request, on x's route; e is not changed. hd is what admit
// reads of upstream alone, when the caller worked it out already; nil:
// admit works it out.
func (x *exchange) admit(e *cache.Entry, upstream http.Header, hd *heard) admission {
	now := x.h.now()
	if hd == nil {
		h := hear(upstream, e.StoredAt, now)
		hd = &h
	}
	o := admit.Options{Route: x.rs.rt, MaxBody: x.h.maxBody, Tombs: x.h.tombs}
	// Every fetch that stores comes here (the per-key fill, its
	// stale-while-revalidate refresh, the cluster lease's fill, a 304's
	// refresh), and every one is judged by what it sent (x.sent).
	return admit.Decide(&o, e, upstream, hd, x.sentWithout(hd.Vary) || x.sentUnvaried(hd.Vary), now)
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
	if coding, ok := cachekey.CodingOf(h); ok {
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
