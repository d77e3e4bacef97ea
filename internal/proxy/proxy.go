// Package proxy is the sidecar's http.Handler: it matches a route, answers
// from the cache when it may, collapses concurrent misses into one upstream
// call (or one bulk call for batch routes), stores what is cacheable, and
// passes everything else through untouched. It declares the few interfaces
// it needs of the cache tiers; it does not know how they are built.
package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sidecache/sidecache/internal/batch"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/coalesce"
	"github.com/sidecache/sidecache/internal/metrics"
	"github.com/sidecache/sidecache/internal/route"
	"github.com/sidecache/sidecache/internal/tombstone"
)

// Cache is what the proxy needs of the (tiered) store: a lookup that says
// which tier answered, and writes. cache.Tiered satisfies it.
type Cache interface {
	Lookup(ctx context.Context, key string) (*cache.Entry, cache.Tier, error)
	// LookupLocal reads this replica's own tier only (L1).
	LookupLocal(ctx context.Context, key string) (*cache.Entry, cache.Tier, error)
	// LookupMany reads many keys with at most one L2 round trip.
	LookupMany(ctx context.Context, keys []string) ([]*cache.Entry, []cache.Tier, error)
	Set(ctx context.Context, key string, e *cache.Entry) error
}

// Invalidator drops every entry under the given tags, in this replica's L1
// before it returns and in the shared tier and the peers' L1s as well.
type Invalidator interface {
	InvalidateTags(ctx context.Context, tags ...string) error
}

// Leaser makes coalescing cluster-wide: one replica holds the lease for a
// cold key and fetches it; the others wait for its write to the shared tier.
type Leaser interface {
	Lease(ctx context.Context, key string, ttl time.Duration) (release func(), acquired bool, err error)
	WaitFill(ctx context.Context, key string, max time.Duration) (*cache.Entry, bool, error)
}

// Options configure a Handler. Upstream and Routes are required.
type Options struct {
	Upstream *url.URL
	// Timeout bounds a whole upstream fetch on the cached path, and the
	// wait for response headers on the pass-through path (a long download
	// that has started is not cut).
	Timeout             time.Duration
	MaxBodyBytes        int64
	MaxIdleConnsPerHost int
	Transport           http.RoundTripper // nil: NewTransport
	Routes              *route.Table
	Cache               Cache       // nil: nothing is cached
	Invalidator         Invalidator // nil: writes invalidate nothing
	Leaser              Leaser      // nil: coalescing is per replica
	LeaseTTL            time.Duration
	Metrics             *metrics.Metrics // nil: a private registry
	Logger              *slog.Logger
	Now                 func() time.Time
}

// Handler is the proxy. It is safe for concurrent use; SetRoutes swaps the
// route table atomically (hot reload) without disturbing requests in flight.
type Handler struct {
	up        *url.URL
	timeout   time.Duration
	maxBody   int64
	transport http.RoundTripper
	cache     Cache
	inv       Invalidator
	leaser    Leaser
	leaseTTL  time.Duration
	m         *metrics.Metrics
	log       *slog.Logger
	now       func() time.Time

	state   atomic.Pointer[state]
	flights coalesce.Group[*flight]
	pass    *httputil.ReverseProxy
	hfp     hitForPass
	// refreshing holds the keys with a stale-while-revalidate refresh
	// under way, so a burst of stale hits starts one goroutine, not many.
	refreshing sync.Map
	tombs      *tombstone.Set
}

// state is what a reload replaces as one: the table and the batchers built
// for its routes.
type state struct {
	table    *route.Table
	batchers map[*route.Route]*batch.Loader[*http.Request, *cache.Entry]
}

// New builds a Handler.
func New(opts Options) (*Handler, error) {
	if opts.Upstream == nil || opts.Upstream.Scheme == "" || opts.Upstream.Host == "" {
		return nil, errors.New("proxy: upstream url is required")
	}
	if opts.Routes == nil {
		return nil, errors.New("proxy: routes are required")
	}
	h := &Handler{
		up:       opts.Upstream,
		timeout:  opts.Timeout,
		maxBody:  opts.MaxBodyBytes,
		cache:    opts.Cache,
		inv:      opts.Invalidator,
		leaser:   opts.Leaser,
		leaseTTL: opts.LeaseTTL,
		m:        opts.Metrics,
		log:      opts.Logger,
		now:      opts.Now,
	}
	if h.timeout <= 0 {
		h.timeout = 10 * time.Second
	}
	if h.maxBody <= 0 {
		h.maxBody = 8 << 20
	}
	if h.leaseTTL <= 0 {
		h.leaseTTL = h.timeout
	}
	if h.m == nil {
		h.m = metrics.New(nil)
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	h.tombs = tombstone.New(h.timeout + 10*time.Second)
	h.transport = opts.Transport
	if h.transport == nil {
		h.transport = NewTransport(h.timeout, opts.MaxIdleConnsPerHost)
	}
	h.pass = h.newPassProxy()
	h.SetRoutes(opts.Routes)
	return h, nil
}

// NewTransport is a keep-alive pool sized for one upstream on loopback. The
// response-header timeout makes a hung upstream answer 504 on pass-through.
func NewTransport(timeout time.Duration, idlePerHost int) *http.Transport {
	if idlePerHost <= 0 {
		idlePerHost = 256
	}
	return &http.Transport{
		Proxy:                 nil, // a sidecar talks to its own pod, never through a proxy
		DialContext:           (&net.Dialer{Timeout: min(timeout, 5*time.Second), KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          idlePerHost * 2,
		MaxIdleConnsPerHost:   idlePerHost,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: timeout,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     false,
	}
}

// SetRoutes swaps the route table. Batchers of the old table finish the
// batches they hold; new requests use the new ones.
func (h *Handler) SetRoutes(t *route.Table) {
	st := &state{table: t, batchers: map[*route.Route]*batch.Loader[*http.Request, *cache.Entry]{}}
	for _, rt := range t.Routes() {
		if rt.Batch != nil {
			st.batchers[rt] = h.newBatcher(rt)
		}
	}
	h.state.Store(st)
}

// Routes is the table in force.
func (h *Handler) Routes() *route.Table { return h.state.Load().table }

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := h.now()
	st := h.state.Load()
	rt, params, ok := st.table.Match(r.Method, r.URL.Path)
	if !ok {
		h.passThrough(w, r, h.m.Route(metrics.PassRoute), start, status{fwd: "bypass", detail: "no-route"}, nil)
		return
	}
	rm := h.m.Route(rt.Name)
	switch {
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		h.serveWrite(w, r, rt, params, rm, start)
	case h.cache == nil || !rt.Cacheable() && rt.Split == nil:
		h.passThrough(w, r, rm, start, status{fwd: "bypass", detail: "uncached-route"}, nil)
	case rt.Split != nil:
		h.serveSplit(w, r, st, rt, rm, start)
	default:
		h.serveCached(w, r, st, rt, params, rm, start)
	}
}

// serveWrite forwards an unsafe request and, after a 2xx, drops the route's
// invalidate tags before the client sees the answer, so a client always
// reads its own write (RFC 9111 §4.4 asks the same of a cache). A write
// whose outcome is unknown — the upstream timed out or the connection broke
// after the request was sent — may have been applied, so it invalidates
// too.
func (h *Handler) serveWrite(w http.ResponseWriter, r *http.Request, rt *route.Route, params route.Params, rm *metrics.RouteMetrics, start time.Time) {
	var after func(code int)
	if len(rt.Invalidate) > 0 && h.inv != nil {
		tags := expand(rt.Invalidate, params)
		after = func(code int) {
			if code != 0 && (code < 200 || code > 299) {
				return
			}
			h.Invalidated(tags...)
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.timeout)
			defer cancel()
			if err := h.inv.InvalidateTags(ctx, tags...); err != nil {
				h.log.Warn("invalidate after write", "route", rt.Name, "tags", tags, "err", err)
			}
			h.m.Invalidation("write", len(tags))
		}
	}
	h.passThrough(w, r, rm, start, status{fwd: "method"}, after)
}

type passCtxKey struct{}

// passInfo travels in the request context to the shared ReverseProxy's
// hooks, so one ReverseProxy serves every route without a closure per call.
type passInfo struct {
	st    status
	after func(code int) // the upstream's status, 0 when unknown (an error)
	rm    *metrics.RouteMetrics
	start time.Time
}

func (h *Handler) passThrough(w http.ResponseWriter, r *http.Request, rm *metrics.RouteMetrics, start time.Time, st status, after func(code int)) {
	pi := &passInfo{st: st, after: after, rm: rm, start: start}
	h.pass.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), passCtxKey{}, pi)))
	result := metrics.Pass
	if st.fwd == "bypass" && st.detail != "no-route" && st.detail != "uncached-route" {
		result = metrics.Bypass
	}
	rm.Request(result, h.now().Sub(start))
}

func (h *Handler) newPassProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(h.up)
			pr.SetXForwarded()
		},
		Transport: h.transport,
		// 0: ReverseProxy already flushes at once for streams (unknown
		// length, text/event-stream); flushing every write of an ordinary
		// response costs a syscall each and halved pass-through throughput.
		FlushInterval: 0,
		ModifyResponse: func(resp *http.Response) error {
			pi, _ := resp.Request.Context().Value(passCtxKey{}).(*passInfo)
			if pi == nil {
				return nil
			}
			pi.rm.Upstream(resp.StatusCode, h.now().Sub(pi.start))
			if pi.after != nil {
				pi.after(resp.StatusCode)
			}
			st := pi.st
			st.fwdStatus = resp.StatusCode
			resp.Header.Set("Cache-Status", appendCacheStatus(resp.Header.Get("Cache-Status"), st.String()))
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
			h.log.Warn("upstream", "method", r.Method, "path", r.URL.Path, "err", err)
			st := status{fwd: "bypass"}
			if pi != nil {
				st = pi.st
			}
			writeUpstreamError(w, classify(err), st)
		},
		ErrorLog:   slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
		BufferPool: newBufferPool(),
	}
}

// bufferPool recycles ReverseProxy's copy buffers; without it every
// pass-through response allocates 32 KiB.
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

func expand(ts []route.Template, p route.Params) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.Expand(p))
	}
	return out
}

// Invalidated records that tags were invalidated now (by a write here, a
// purge, or a peer's message), so that fetches begun before now are not
// stored or served. The caller drops the stored entries themselves.
func (h *Handler) Invalidated(tags ...string) { h.tombs.Add(h.now(), tags...) }

// InvalidatedAll is Invalidated for a purge of everything.
func (h *Handler) InvalidatedAll() { h.tombs.AddAll(h.now()) }
