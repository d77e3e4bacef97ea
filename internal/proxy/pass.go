package proxy

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sidecache/sidecache/internal/passproxy"
	"github.com/sidecache/sidecache/internal/relay"
	"github.com/sidecache/sidecache/internal/upfail"
)

// write forwards a request a route or its method may make invalidate
// (every unsafe method, and a route with invalidate tags), and applies the
// invalidation the upstream's answer calls for (invalidate.go,
// internal/writeinv) before the client sees that answer, so a client
// always reads its own write (RFC 9111 §4.4 asks the same of a cache).
func (x *exchange) write(o outcome, detail string) {
	inv := x.writeInvalidation()
	switch {
	case inv == nil:
		x.passWith(o, detail, nil)
	case inv.p.TooManySpellings():
		x.refuseSpellings()
	case inv.p.TooManyIDs():
		x.refuseIDs(inv.p.MaxIDs())
	default:
		x.passWith(o, detail, inv.after)
	}
}

// pass streams the request to the upstream and back, untouched but for
// hop-by-hop and X-Forwarded-* headers (httputil.ReverseProxy).
func (x *exchange) pass(o outcome, detail string) { x.passWith(o, detail, nil) }

func (x *exchange) passWith(o outcome, detail string, after func(code int, answer http.Header)) {
	st := x.status(o, nil, 0)
	if detail != "" {
		st.Detail = detail
	}
	// The lean loop writes its own request: tracing (which injects the
	// request span as traceparent) takes the ReverseProxy way.
	if after == nil && x.h.tr == nil && x.st.lean.Takes(x.r) {
		x.leanPass(st)
	} else {
		// What the shared ReverseProxy's hooks need of the request
		// travels in its context (internal/passproxy).
		pi := &passproxy.Info{Rec: x.rec, Route: x.rs.m, Start: x.start, Status: st, After: after, In: x.r.Context()}
		if after != nil {
			// ReverseProxy panics with http.ErrAbortHandler when the
			// client is gone mid-body: the detached context ends anyway.
			defer pi.End()
		}
		x.st.pass.ServeHTTP(relay.Guard(x.w, x.r, x.h.tagh.StripFrom), pi.Request(x.r))
	}
	x.count(outcomes[o].result)
}

// newPassProxy is the pass-through ReverseProxy of upstream up
// (internal/passproxy).
func (h *Handler) newPassProxy(up *url.URL, transport http.RoundTripper, timeout time.Duration) *passproxy.Proxy {
	return passproxy.New(passproxy.Options{
		Upstream: up, Transport: transport, Timeout: timeout,
		CurrentTimeout: func() time.Duration { return h.state.Load().timeout },
		MaxHeaderBytes: h.maxHdr, Inject: h.inject, Trailers: h.trailers, Via: h.via, Tags: &h.tagh, Now: h.now,
		Refused: h.m.EdgeRefused, Failed: h.logUpstream, Log: h.log, Bufs: h.bufs,
	})
}

// logUpstream writes the one line of a request answered 502 or 504
// because the upstream failed, the same on every path (internal/upstreamlog).
func (h *Handler) logUpstream(r *http.Request, route string, code int, err error) {
	h.upLog.Failed(r, route, code, err)
}

// writeFailure is upfail.Write for a cached route's request, with
// Retry-After (RFC 9110 §10.2.3) on the 503 of a miss the batcher
// refused, its group's queue full (bulkanswer.Failed): by then the calls in
// flight have ended, each within upstream.timeout, and the queue has
// moved on. Rounded up to whole seconds, at least 1.
func (x *exchange) writeFailure(ue *upfail.Error, st status) {
	if ue.Code == http.StatusServiceUnavailable {
		x.w.Header().Set("Retry-After", strconv.Itoa(upfail.RetryAfter(x.st.timeout)))
	}
	upfail.Write(x.w, ue, st)
}
