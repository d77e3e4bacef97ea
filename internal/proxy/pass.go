package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strconv"
	"time"

	"github.com/sidecache/sidecache/internal/accesslog"
	"github.com/sidecache/sidecache/internal/clientaddr"
	"github.com/sidecache/sidecache/internal/detached"
	"github.com/sidecache/sidecache/internal/edge"
	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/lean"
	"github.com/sidecache/sidecache/internal/metrics"
	"github.com/sidecache/sidecache/internal/relay"
	"github.com/sidecache/sidecache/internal/sendbound"
	"github.com/sidecache/sidecache/internal/tunnel"
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
	default:
		x.passWith(o, detail, inv.after)
	}
}

// pass streams the request to the upstream and back, untouched but for
// hop-by-hop and X-Forwarded-* headers (httputil.ReverseProxy).
func (x *exchange) pass(o outcome, detail string) { x.passWith(o, detail, nil) }

type passCtxKey struct{}

// passInfo travels in the request context to the shared ReverseProxy's
// hooks, so one ReverseProxy serves every route without a closure per call.
type passInfo struct {
	rec   *accesslog.Record
	rm    *metrics.RouteMetrics
	start time.Time
	st    status
	// after is told the upstream's answer to a write, or code 0 when the
	// request was sent whole and no answer came; nil for other requests.
	after func(code int, answer http.Header)
	// in is the client's context: a write's own is detached from it.
	in context.Context
	// det is a write's upstream request, detached from in (Rewrite sets
	// it; internal/detached); nil for other requests.
	det *detached.Call
}

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
		pi := &passInfo{rec: x.rec, rm: x.rs.m, start: x.start, st: st, after: after, in: x.r.Context()}
		if after != nil {
			// ReverseProxy panics with http.ErrAbortHandler when the
			// client is gone mid-body: the detached context ends anyway.
			defer pi.end()
		}
		x.st.pass.ServeHTTP(relay.Guard(x.w, x.r, x.h.tagh.StripFrom), x.r.WithContext(context.WithValue(x.r.Context(), passCtxKey{}, pi)))
	}
	x.count(outcomes[o].result)
}

func (h *Handler) newPassProxy(up *url.URL, transport http.RoundTripper, timeout time.Duration) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(up)
			pr.SetXForwarded()
			clientaddr.Set(pr.Out.Header, pr.In.RemoteAddr)
			h.inject(pr.Out.Context(), pr.Out.Header)
			if pi, _ := pr.In.Context().Value(passCtxKey{}).(*passInfo); pi != nil && pi.after != nil {
				// A whole write outlives its client, timeout more: the
				// upstream's answer decides what it invalidates.
				pr.Out, pi.det = detached.Request(pr.Out, pi.in, timeout)
			}
			// ReverseProxy's own 1xx hook resets the Transport's header
			// bound at each 1xx; this one (older, so its error wins)
			// bounds them all together (relay.Budget).
			budget := relay.NewBudget(h.maxHdr)
			pr.Out = pr.Out.WithContext(httptrace.WithClientTrace(pr.Out.Context(), &httptrace.ClientTrace{
				Got1xxResponse: func(_ int, hdr textproto.MIMEHeader) error { return budget.Spend(http.Header(hdr)) },
			}))
		},
		Transport: transport,
		// 0: ReverseProxy already flushes at once for streams (unknown
		// length, text/event-stream); flushing every write of an ordinary
		// response costs a syscall each and halved pass-through throughput.
		FlushInterval: 0,
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode < 100 {
				// Three digits but no status (RFC 9110 §15): a 502 and
				// the connection closed (ReverseProxy closes the body
				// unread), not a ResponseWriter's panic.
				return fmt.Errorf("upstream status %d out of range", resp.StatusCode)
			}
			lean.FilterTrailers(resp, h.trailers) // the trailer rules of every path
			httpcache.AddVia(resp.Header, h.via)
			pi, _ := resp.Request.Context().Value(passCtxKey{}).(*passInfo)
			if pi == nil {
				return nil
			}
			h.tagh.StripFrom(resp.Header)
			took := h.now().Sub(pi.start)
			pi.rm.Upstream(resp.StatusCode, took)
			if pi.rec != nil {
				pi.rec.Upstream = took
			}
			if pi.after != nil {
				pi.after(resp.StatusCode, resp.Header)
			}
			st := pi.st
			st.FwdStatus = resp.StatusCode
			resp.Header.Set("Cache-Status", httpcache.AppendCacheStatus(resp.Header.Get("Cache-Status"), st.String()))
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			pi, _ := r.Context().Value(passCtxKey{}).(*passInfo)
			if edge.BodyTimedOut(r) || edge.BodyMalformed(r) {
				// The client's body was still arriving at read_timeout,
				// or broke its framing: it is there, and told so (408,
				// 400: edge/badbody.go), not answered as one
				// that left (nothing, which net/http makes an empty 200)
				// nor as an upstream failure. The upstream may have
				// acted on the part it got: lenient for invalidation, a
				// write whose header went out invalidates as one sent
				// whole with no answer.
				if pi != nil && pi.after != nil && pi.det != nil && (pi.det.Sent() || pi.det.Started()) {
					pi.after(0, nil)
				}
				edge.AnswerBody(w, r)
				return
			}
			if errors.Is(err, tunnel.ErrLimit) {
				// Refused unsent (internal/tunnel): no upstream failure to
				// count or log, the client told when to try again.
				st := status{Fwd: "bypass"}
				if pi != nil {
					st = pi.st
				}
				h.m.EdgeRefused(edge.ReasonTunnelLimit)
				w.Header().Set("Retry-After", strconv.Itoa(upfail.RetryAfter(h.state.Load().timeout)))
				upfail.Write(w, &upfail.Error{Code: http.StatusServiceUnavailable, Err: err}, st)
				return
			}
			clientLeft := r.Context().Err() != nil
			if pi != nil {
				clientLeft = pi.in.Err() != nil
				if !clientLeft {
					pi.rm.Upstream(0, h.now().Sub(pi.start))
				}
				if pi.after != nil && pi.det != nil && (pi.det.Sent() || sendbound.Cut(err) && pi.det.Started()) {
					// Sent whole, no answer, or cut while the upstream
					// took no more of it (internal/sendbound): it may
					// have been applied, in part.
					pi.after(0, nil)
				}
			}
			if clientLeft {
				return // there is no one to answer
			}
			st, route := status{Fwd: "bypass"}, metrics.PassRoute
			if pi != nil {
				st, route = pi.st, pi.rm.Name()
			}
			ue := upfail.Classify(err)
			h.logUpstream(r, route, ue.Code, err)
			upfail.Write(w, ue, st)
		},
		ErrorLog:   slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
		BufferPool: h.bufs,
	}
}

// end ends a write's detached context, if it has one.
func (pi *passInfo) end() {
	if pi.det != nil {
		pi.det.Stop()
	}
}

// logUpstream writes the one line of a request answered 502 or 504
// because the upstream failed, the same on every path (internal/upstreamlog).
func (h *Handler) logUpstream(r *http.Request, route string, code int, err error) {
	h.upLog.Failed(r, route, code, err)
}

// writeFailure is upfail.Write for a cached route's request, with
// Retry-After (RFC 9110 §10.2.3) on the 503 of a miss the batcher
// refused, its group's queue full (batchFailed): by then the calls in
// flight have ended, each within upstream.timeout, and the queue has
// moved on. Rounded up to whole seconds, at least 1.
func (x *exchange) writeFailure(ue *upfail.Error, st status) {
	if ue.Code == http.StatusServiceUnavailable {
		x.w.Header().Set("Retry-After", strconv.Itoa(upfail.RetryAfter(x.st.timeout)))
	}
	upfail.Write(x.w, ue, st)
}
