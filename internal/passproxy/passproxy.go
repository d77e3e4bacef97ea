// Package passproxy is the pass-through path's httputil.ReverseProxy, for
// the requests the lean loop (internal/lean) does not take: writes,
// traced requests, upgrades, an upstream it cannot reach. One serves
// every route of an upstream; what a request needs of it (its route's
// metrics, its access log record, its Cache-Status member, a write's
// invalidation) travels in the request's context (Info), so no closure
// is made per request.
//
// It keeps the rules every path keeps, each in its own package:
// X-Forwarded-* and X-Real-Ip from the connection (internal/clientaddr),
// one header budget for all the upstream's 1xx (relay.Budget), the trailer
// filter and Via (RFC 9110 §6.5, §7.6.3), the tag headers stripped
// (internal/surrogate), a write detached from its client for a bounded
// grace (internal/detached), a client body that timed out or broke its
// framing answered as such (internal/edge), the tunnel limit's 503
// (internal/tunnel), a client's Expect answered here and never forwarded
// (httpcache.IsExpect), and an upstream failure answered and logged as on
// every path (internal/upfail).
package passproxy

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
	"github.com/sidecache/sidecache/internal/cachestatus"
	"github.com/sidecache/sidecache/internal/clientaddr"
	"github.com/sidecache/sidecache/internal/detached"
	"github.com/sidecache/sidecache/internal/edge"
	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/lean"
	"github.com/sidecache/sidecache/internal/metrics"
	"github.com/sidecache/sidecache/internal/relay"
	"github.com/sidecache/sidecache/internal/sendbound"
	"github.com/sidecache/sidecache/internal/surrogate"
	"github.com/sidecache/sidecache/internal/tunnel"
	"github.com/sidecache/sidecache/internal/upfail"
)

// Options are what the proxy of one upstream needs.
type Options struct {
	Upstream  *url.URL
	Transport http.RoundTripper
	// Timeout is the upstream timeout the proxy is made with: a write
	// outlives its client by as much (detached.Request).
	Timeout time.Duration
	// CurrentTimeout is the upstream timeout in force, for the
	// Retry-After of the tunnel limit's 503.
	CurrentTimeout func() time.Duration
	// MaxHeaderBytes bounds the upstream's 1xx header sections together.
	MaxHeaderBytes int64
	// Inject writes the current span as the upstream request's
	// traceparent (nil: tracing off).
	Inject   func(ctx context.Context, h http.Header)
	Trailers func(http.Header) // filters the upstream's trailers
	Via      []string          // the Via field an answer carries; nil: none
	Tags     *surrogate.Headers
	Now      func() time.Time
	// Refused counts a request the edge refuses (edge.ReasonTunnelLimit).
	Refused func(reason string)
	// Failed logs an upstream failure answered code, once per request
	// (internal/upstreamlog).
	Failed func(r *http.Request, route string, code int, err error)
	Log    *slog.Logger
	Bufs   httputil.BufferPool
}

// StalledFlush is how long an answer of known length to a request without
// a body may hold written bytes (its header first) in the client's write
// buffer while ReverseProxy waits on the upstream for more
// (httputil.ReverseProxy.FlushInterval). The lean loop flushes before any
// read that waits (lean.CopyBody); the Transport's reads do not tell, so a
// timer does, armed per answer and stopped when its copy ends.
//
// A request with a body is not flushed early (Proxy): net/http writing the
// header reads and discards what is left of the client's body (up to
// 256 KiB, its answer-before-body rule), and ReverseProxy may still be
// copying that body to the upstream — one that answers its header before
// it has read the body would get it cut short. Such an answer is held as
// before: sent once its body fills net/http's buffer or ends.
const StalledFlush = 10 * time.Millisecond

// Proxy is the pass-through ReverseProxy of one upstream, in two forms
// alike but for their FlushInterval: StalledFlush for a request without a
// body, 0 (streams alone flushed) for one with a body.
type Proxy struct {
	bodiless, bodied *httputil.ReverseProxy
}

// ServeHTTP passes r through the form its body calls for.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		p.bodiless.ServeHTTP(w, r)
		return
	}
	p.bodied.ServeHTTP(w, r)
}

// Info is what one request tells the proxy (Request).
type Info struct {
	Rec    *accesslog.Record // nil unless the access log is on
	Route  *metrics.RouteMetrics
	Start  time.Time
	Status cachestatus.Member
	// After is told the upstream's answer to a write, or code 0 when the
	// request was sent whole and no answer came; nil for other requests.
	After func(code int, answer http.Header)
	// In is the client's context: a write's own is detached from it.
	In context.Context
	// det is a write's upstream request, detached from In (Rewrite sets
	// it; internal/detached); nil for other requests.
	det *detached.Call
}

type ctxKey struct{}

// Request is r carrying pi, for the proxy's ServeHTTP.
func (pi *Info) Request(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), ctxKey{}, pi))
}

// End ends a write's detached context, if it has one: once the proxy
// has answered.
func (pi *Info) End() {
	if pi.det != nil {
		pi.det.Stop()
	}
}

func infoOf(ctx context.Context) *Info {
	pi, _ := ctx.Value(ctxKey{}).(*Info)
	return pi
}

// New is the proxy of one upstream.
func New(o Options) *Proxy {
	rp := newReverseProxy(o)
	bodied := *rp
	bodied.FlushInterval = 0
	return &Proxy{bodiless: rp, bodied: &bodied}
}

// newReverseProxy is New's ReverseProxy for a request without a body.
func newReverseProxy(o Options) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(o.Upstream)
			pr.SetXForwarded()
			// The client's 100-continue is answered here, as the body is
			// read (httpcache.IsExpect): the body goes at once.
			pr.Out.Header.Del("Expect")
			clientaddr.Set(pr.Out.Header, pr.In.RemoteAddr)
			if o.Inject != nil {
				o.Inject(pr.Out.Context(), pr.Out.Header)
			}
			if pi := infoOf(pr.In.Context()); pi != nil && pi.After != nil {
				// A whole write outlives its client, timeout more: the
				// upstream's answer decides what it invalidates.
				pr.Out, pi.det = detached.Request(pr.Out, pi.In, o.Timeout)
			}
			// ReverseProxy's own 1xx hook resets the Transport's header
			// bound at each 1xx; this one (older, so its error wins)
			// bounds them all together (relay.Budget).
			budget := relay.NewBudget(o.MaxHeaderBytes)
			pr.Out = pr.Out.WithContext(httptrace.WithClientTrace(pr.Out.Context(), &httptrace.ClientTrace{
				Got1xxResponse: func(_ int, hdr textproto.MIMEHeader) error { return budget.Spend(http.Header(hdr)) },
			}))
		},
		Transport: o.Transport,
		// ReverseProxy flushes streams (unknown length, text/event-stream)
		// after every write already. An answer of known length is flushed
		// once it has waited StalledFlush with something written and not
		// sent (its header first): an upstream that sends its header and
		// then stalls leaves the client holding the status and what came,
		// as the lean loop does (lean.CopyBody), not nothing until the
		// upstream timeout cuts the connection. An answer that comes whole
		// is copied before the timer fires, in one write as before:
		// flushing every write of an ordinary response costs a syscall
		// each and halved pass-through throughput. New's bodied form
		// has 0 (StalledFlush).
		FlushInterval: StalledFlush,
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode < 100 {
				// Three digits but no status (RFC 9110 §15): a 502 and
				// the connection closed (ReverseProxy closes the body
				// unread), not a ResponseWriter's panic.
				return fmt.Errorf("upstream status %d out of range", resp.StatusCode)
			}
			lean.FilterTrailers(resp, o.Trailers) // the trailer rules of every path
			httpcache.AddVia(resp.Header, o.Via)
			pi := infoOf(resp.Request.Context())
			if pi == nil {
				return nil
			}
			o.Tags.StripFrom(resp.Header)
			took := o.Now().Sub(pi.Start)
			pi.Route.Upstream(resp.StatusCode, took)
			if pi.Rec != nil {
				pi.Rec.Upstream = took
			}
			if pi.After != nil {
				pi.After(resp.StatusCode, resp.Header)
			}
			st := pi.Status
			st.FwdStatus = resp.StatusCode
			resp.Header.Set("Cache-Status", httpcache.AppendCacheStatus(resp.Header.Get("Cache-Status"), st.String()))
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			pi := infoOf(r.Context())
			if edge.BodyTimedOut(r) || edge.BodyMalformed(r) {
				// The client's body was still arriving at read_timeout,
				// or broke its framing: it is there, and told so (408,
				// 400: edge/badbody.go), not answered as one
				// that left (nothing, which net/http makes an empty 200)
				// nor as an upstream failure. The upstream may have
				// acted on the part it got: lenient for invalidation, a
				// write whose header went out invalidates as one sent
				// whole with no answer.
				if pi != nil && pi.After != nil && pi.det != nil && (pi.det.Sent() || pi.det.Started()) {
					pi.After(0, nil)
				}
				edge.AnswerBody(w, r)
				return
			}
			if errors.Is(err, tunnel.ErrLimit) {
				// Refused unsent (internal/tunnel): no upstream failure to
				// count or log, the client told when to try again.
				st := cachestatus.Member{Fwd: "bypass"}
				if pi != nil {
					st = pi.Status
				}
				o.Refused(edge.ReasonTunnelLimit)
				w.Header().Set("Retry-After", strconv.Itoa(upfail.RetryAfter(o.CurrentTimeout())))
				upfail.Write(w, &upfail.Error{Code: http.StatusServiceUnavailable, Err: err}, st)
				return
			}
			clientLeft := r.Context().Err() != nil
			if pi != nil {
				clientLeft = pi.In.Err() != nil
				if !clientLeft {
					pi.Route.Upstream(0, o.Now().Sub(pi.Start))
				}
				if pi.After != nil && pi.det != nil && (pi.det.Sent() || sendbound.Cut(err) && pi.det.Started()) {
					// Sent whole, no answer, or cut while the upstream
					// took no more of it (internal/sendbound): it may
					// have been applied, in part.
					pi.After(0, nil)
				}
			}
			if clientLeft {
				return // there is no one to answer
			}
			st, route := cachestatus.Member{Fwd: "bypass"}, metrics.PassRoute
			if pi != nil {
				st, route = pi.Status, pi.Route.Name()
			}
			ue := upfail.Classify(err)
			o.Failed(r, route, ue.Code, err)
			upfail.Write(w, ue, st)
		},
		ErrorLog:   slog.NewLogLogger(o.Log.Handler(), slog.LevelDebug),
		BufferPool: o.Bufs,
	}
}
