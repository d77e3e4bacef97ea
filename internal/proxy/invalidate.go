package proxy

import (
	"context"
	"net/http"

	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/surrogate"
)

// Invalidation by URI (RFC 9111 §4.4): a non-error answer to an unsafe
// method invalidates the target URI, and the URIs in the answer's Location
// and Content-Location when they share its origin, whichever route those
// URIs match — not only the route the write matched, and also when no route
// matched the write at all.
//
// Every stored entry carries the implicit tag surrogate.URITag(path) (see
// tagEntry), so a URI invalidation is a tag invalidation: it reaches this
// replica's L1 before the client sees the answer, then L2's epochs and the
// peers' L1s, with the tombstones and coherence rules every tag
// invalidation has. The tag is derived from the decoded path alone, so it
// drops every query string, every variant and every Host of that path:
// coarser than the key, which costs misses, never a stale answer.
//
// What a flood of writes costs is bounded: at most three tags per write
// (target, Location, Content-Location), each only when its path is one a
// cacheable route could have stored (anything else has no entry to drop,
// and costs no Redis round trip), each no longer than max_key_bytes (a
// longer path has no entry either); the tombstones are bounded by bytes,
// and an epoch key Redis evicts reads as a miss.

func nothing() {}

// invalidateURI makes the answer to x's unsafe request invalidate its URIs
// before the client sees it: it puts a writer in front of x.w that acts
// when the status is written. The returned func must run when the request
// is done (defer x.invalidateURI()()): a request answered nothing — the
// client left before the upstream answered — may still have been applied,
// and it then invalidates the target URI. It keeps no reference to x, so
// the exchange stays on the stack.
func (x *exchange) invalidateURI() func() {
	if httpcache.SafeMethod(x.r.Method) || x.h.inv == nil || x.h.cache == nil {
		return nothing
	}
	u := &uriWriter{ResponseWriter: x.w, h: x.h, st: x.st, r: x.r}
	x.w = u
	return u.finish
}

// uriWriter is the ResponseWriter of an unsafe request's pass-through.
type uriWriter struct {
	http.ResponseWriter
	h    *Handler
	st   *state
	r    *http.Request
	done bool // the final status was written
}

// Unwrap lets http.ResponseController (ReverseProxy's flushes and
// upgrades) reach the connection.
func (u *uriWriter) Unwrap() http.ResponseWriter { return u.ResponseWriter }

func (u *uriWriter) WriteHeader(code int) {
	if !u.done && code >= 200 {
		u.done = true
		u.invalidate(code)
	}
	u.ResponseWriter.WriteHeader(code)
}

func (u *uriWriter) Write(b []byte) (int, error) {
	if !u.done {
		u.done = true
		u.invalidate(http.StatusOK)
	}
	return u.ResponseWriter.Write(b)
}

func (u *uriWriter) finish() {
	if !u.done {
		u.done = true
		u.invalidate(0)
	}
}

// stored reports whether an entry could exist for path: within the key
// bound, and a path a cacheable route takes.
func (u *uriWriter) stored(path string) bool {
	return len(path) <= u.h.maxKey && u.cacheablePath(path)
}

// cacheablePath reports whether a GET or HEAD of path would reach a route
// that stores entries (split routes store none of their own).
func (u *uriWriter) cacheablePath(path string) bool {
	for _, m := range [...]string{http.MethodGet, http.MethodHead} {
		if rt, _, ok := u.st.table.MatchAppend(nil, m, path); ok && rt.Cacheable() {
			return true
		}
	}
	return false
}

// invalidate drops the URI tags an answer of status code invalidates
// (surrogate.Invalidated; the request's Host and the upstream's are its
// origin) here and everywhere, as a write route's invalidation does (see
// write).
func (u *uriWriter) invalidate(code int) {
	tags := surrogate.Invalidated(code, u.r.URL, u.Header(), u.stored, u.r.Host, u.st.up.Host)
	if len(tags) == 0 {
		return
	}
	u.h.Invalidated(tags...)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(u.r.Context()), u.st.timeout)
	defer cancel()
	if err := u.h.inv.InvalidateTags(ctx, tags...); err != nil {
		u.h.log.Warn("invalidate uri after write", "method", u.r.Method, "tags", tags, "err", err)
	}
	u.h.m.Invalidation("write", len(tags))
}
