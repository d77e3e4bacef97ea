package proxy

import (
	"context"
	"net/http"
	"slices"

	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/route"
	"github.com/sidecache/sidecache/internal/spelling"
	"github.com/sidecache/sidecache/internal/surrogate"
)

// A write invalidates what it may have changed, and only that; anyone can
// send one, so what it costs is bounded.
//
// When: only once the upstream has had its say. A write route's invalidate
// tags drop after a 2xx (or a 101: an upgraded connection may carry writes
// of its own); its URIs (RFC 9111 §4.4) after a 2xx or 3xx. A write whose
// request provably reached the upstream — it was written whole — but whose
// answer never came (a timeout, a connection reset after sending) may have
// been applied, and invalidates as a 2xx would the target's tags. A write
// the upstream refused (4xx, 405, 5xx) or never received whole (the client
// hung up mid-body, the dial failed) invalidates nothing. A client that
// hangs up after sending a whole write does not cancel it: the upstream's
// answer still decides, within upstream.timeout (internal/detached).
//
// What: lenient for invalidation (internal/spelling). The write's path,
// its canonical spelling and its folded spelling are each matched against
// the route table, so `PATCH /Clients/05/` drops the `client:5` tags of the
// write route `/clients/{id:[1-9][0-9]*}`, even though its literal
// spelling matches no route. Every stored entry carries the URI tag of its
// folded path (see tagEntry), so the write's URI tag reaches the entry
// whatever spelling either used.
//
// How much: at most three URIs per write (target, Location,
// Content-Location), each tagged only when a spelling of it is one a
// cacheable route could have stored (anything else has no entry to drop,
// and costs no Redis round trip); no tag longer than max_key_bytes (no
// stored entry has one: tagEntry refuses them, strict for storage); the
// tombstones are bounded by bytes, and an epoch key Redis evicts reads as
// a miss.

// writeInv is an unsafe request's invalidation, waiting for the upstream's
// answer. It keeps no reference to the exchange, so that stays on the
// stack.
type writeInv struct {
	h      *Handler
	st     *state
	r      *http.Request
	route  []string // the write routes' invalidate tags, over every spelling
	routes []string // their names, for the log
	uri    bool     // an unsafe method: its URIs are invalidated too
}

// writeInvalidation is x's invalidation, nil when x's request invalidates
// nothing whatever the answer.
func (x *exchange) writeInvalidation() *writeInv {
	if x.h.inv == nil {
		return nil
	}
	w := &writeInv{h: x.h, st: x.st, r: x.r, uri: !httpcache.SafeMethod(x.r.Method) && x.h.cache != nil}
	var params route.Params
	for _, p := range spelling.Candidates(x.r.URL.Path) {
		rt, ps, ok := x.st.table.MatchAppend(params[:0], x.r.Method, p)
		if !ok || len(rt.Invalidate) == 0 {
			continue
		}
		params = ps
		for _, t := range expand(rt.Invalidate, ps) {
			if !slices.Contains(w.route, t) {
				w.route = append(w.route, t)
			}
		}
		if !slices.Contains(w.routes, rt.Name) {
			w.routes = append(w.routes, rt.Name)
		}
	}
	if len(w.route) == 0 && !w.uri {
		return nil
	}
	return w
}

// after applies the invalidation for the upstream's answer: its status
// and header, or code 0 when the request was sent whole and no answer came.
// It is not called for a request that never reached the upstream whole.
func (w *writeInv) after(code int, answer http.Header) {
	var tags []string
	if code == 0 || code == http.StatusSwitchingProtocols || code >= 200 && code <= 299 {
		tags = append(tags, w.route...)
	}
	if w.uri {
		for _, t := range surrogate.Invalidated(code, w.r.URL, answer, w.stored, w.r.Host, w.st.up.Host) {
			if !slices.Contains(tags, t) {
				tags = append(tags, t)
			}
		}
	}
	kept := tags[:0]
	for _, t := range tags {
		if len(t) <= w.h.maxKey {
			kept = append(kept, t)
		}
	}
	if n := len(tags) - len(kept); n > 0 {
		w.h.m.InvalidationSkipped(n)
	}
	if len(kept) == 0 {
		return
	}
	w.h.Invalidated(kept...)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.r.Context()), w.st.timeout)
	defer cancel()
	if err := w.h.inv.InvalidateTags(ctx, kept...); err != nil {
		w.h.log.Warn("invalidate after write", "method", w.r.Method, "routes", w.routes, "tags", len(kept), "err", err)
	}
	w.h.m.Invalidation("write", len(kept))
}

// stored reports whether an entry could exist for path: within the key
// bound, and a path a cacheable route takes.
func (w *writeInv) stored(path string) bool {
	if len(path) > w.h.maxKey {
		return false
	}
	for _, m := range [...]string{http.MethodGet, http.MethodHead} {
		if rt, _, ok := w.st.table.MatchAppend(nil, m, path); ok && rt.Cacheable() {
			return true
		}
	}
	return false
}
