package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/sidecache/sidecache/internal/accesslog"
	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/metrics"
)

// write forwards an unsafe request and, after a 2xx, drops the route's
// invalidate tags before the client sees the answer, so a client always
// reads its own write (RFC 9111 §4.4 asks the same of a cache). A write
// whose outcome is unknown — the upstream timed out, the connection broke
// after the request was sent, or the connection was upgraded to another
// protocol that may carry writes of its own — may have been applied, so it
// invalidates too.
func (x *exchange) write() {
	defer x.invalidateURI()() // RFC 9111 §4.4: the URIs, whichever route they match (invalidate.go)
	rt := x.rs.rt
	if len(rt.Invalidate) == 0 || x.h.inv == nil {
		x.passWith(outWrite, "", nil)
		return
	}
	tags := expand(rt.Invalidate, x.params)
	h, r, timeout := x.h, x.r, x.st.timeout
	x.passWith(outWrite, "", func(code int) {
		if code != 0 && code != http.StatusSwitchingProtocols && (code < 200 || code > 299) {
			return
		}
		h.Invalidated(tags...)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), timeout)
		defer cancel()
		if err := h.inv.InvalidateTags(ctx, tags...); err != nil {
			h.log.Warn("invalidate after write", "route", rt.Name, "tags", tags, "err", err)
		}
		h.m.Invalidation("write", len(tags))
	})
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
	after func(code int) // the upstream's status, 0 when unknown (an error)
}

func (x *exchange) passWith(o outcome, detail string, after func(code int)) {
	st := x.status(o, nil, 0)
	if detail != "" {
		st.detail = detail
	}
	// The lean loop writes its own request: tracing (which injects the
	// request span as traceparent) takes the ReverseProxy way.
	if after == nil && x.h.tr == nil && x.st.lean.Takes(x.r) {
		x.leanPass(st)
	} else {
		pi := &passInfo{rec: x.rec, rm: x.rs.m, start: x.start, st: st, after: after}
		x.st.pass.ServeHTTP(x.h.interimGuard(x.w, x.r), x.r.WithContext(context.WithValue(x.r.Context(), passCtxKey{}, pi)))
	}
	x.count(outcomes[o].result)
}

func (h *Handler) newPassProxy(up *url.URL, transport http.RoundTripper) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(up)
			pr.SetXForwarded()
			h.inject(pr.Out.Context(), pr.Out.Header)
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
			h.filterTrailers(resp)
			pi, _ := resp.Request.Context().Value(passCtxKey{}).(*passInfo)
			if pi == nil {
				return nil
			}
			h.tagh.stripFrom(resp.Header)
			took := h.now().Sub(pi.start)
			pi.rm.Upstream(resp.StatusCode, took)
			if pi.rec != nil {
				pi.rec.Upstream = took
			}
			if pi.after != nil {
				pi.after(resp.StatusCode)
			}
			st := pi.st
			st.fwdStatus = resp.StatusCode
			resp.Header.Set("Cache-Status", httpcache.AppendCacheStatus(resp.Header.Get("Cache-Status"), st.String()))
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			pi, _ := r.Context().Value(passCtxKey{}).(*passInfo)
			clientLeft := r.Context().Err() != nil
			if pi != nil {
				if !clientLeft {
					pi.rm.Upstream(0, h.now().Sub(pi.start))
				}
				if pi.after != nil {
					pi.after(0) // a write with an unknown outcome may have been applied
				}
			}
			if clientLeft {
				return // there is no one to answer
			}
			st, route := status{fwd: "bypass"}, metrics.PassRoute
			if pi != nil {
				st, route = pi.st, pi.rm.Name()
			}
			ue := classify(err)
			h.logUpstream(r, route, ue.code, err)
			writeUpstreamError(w, ue, st)
		},
		ErrorLog:   slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
		BufferPool: h.bufs,
	}
}

// filterTrailers applies h.trailers to the trailers ReverseProxy will
// relay: the names announced now, the ones that came when the body ends
// (the Transport fills resp.Trailer at its EOF, before ReverseProxy copies
// it). An upgraded connection's body is left as it is: ReverseProxy needs
// it to be the connection.
func (h *Handler) filterTrailers(resp *http.Response) {
	if resp.StatusCode == http.StatusSwitchingProtocols || resp.Body == nil || resp.Body == http.NoBody {
		return
	}
	h.trailers(resp.Trailer)
	if resp.ContentLength < 0 { // only a chunked answer has trailers
		resp.Body = &trailerFilter{ReadCloser: resp.Body, resp: resp, f: h.trailers}
	}
}

type trailerFilter struct {
	io.ReadCloser
	resp *http.Response
	f    func(http.Header)
}

func (b *trailerFilter) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && len(b.resp.Trailer) > 0 {
		b.f(b.resp.Trailer)
	}
	return n, err
}

// bufferPool recycles copy buffers; without it every pass-through response
// allocates 32 KiB.
type bufferPool struct{ p *sync.Pool }

func newBufferPool() bufferPool {
	return bufferPool{&sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}
}

func (bp bufferPool) Get() []byte  { return *bp.p.Get().(*[]byte) }
func (bp bufferPool) Put(b []byte) { bp.p.Put(&b) }

// upstreamErr is a fetch failure the client may be told about: only its
// status and a fixed text leave the sidecar, never the upstream's words.
type upstreamErr struct {
	code int
	err  error
}

func (e *upstreamErr) Error() string { return "proxy: upstream: " + e.err.Error() }
func (e *upstreamErr) Unwrap() error { return e.err }

// classify maps a transport error to the status the spec promises: 504 for
// a timeout, 502 for a refused or reset connection and everything else.
func classify(err error) *upstreamErr {
	var ue *upstreamErr
	if errors.As(err, &ue) {
		return ue
	}
	var te interface{ Timeout() bool }
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &te) && te.Timeout() {
		return &upstreamErr{code: http.StatusGatewayTimeout, err: err}
	}
	return &upstreamErr{code: http.StatusBadGateway, err: err}
}

func writeUpstreamError(w http.ResponseWriter, ue *upstreamErr, st status) {
	st.fwdStatus = 0
	if st.detail == "" {
		st.detail = "upstream-error"
	}
	w.Header().Set("Cache-Status", st.String())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(ue.code)
	if ue.code == http.StatusGatewayTimeout {
		_, _ = w.Write([]byte("upstream timeout\n"))
	} else {
		_, _ = w.Write([]byte("bad gateway\n"))
	}
}
