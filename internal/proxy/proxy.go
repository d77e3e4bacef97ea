// Package proxy is the sidecar's http.Handler. One request goes through
// three named stages, like net/http/httputil.ReverseProxy's one linear flow:
//
//   - classify (ServeHTTP): match the route, decide pass-through or bypass,
//     build the key, and make one exchange value for the request;
//   - fill (fill.go): the only code that touches the cache tiers, the
//     cluster lease, the transport and the batcher; it runs once per
//     coalesced flight and returns what that flight produced;
//   - respond (respond.go): one outcome drives both the Cache-Status member
//     and the metrics result.
//
// Two rules are kept in one place each: admit (fit.go, internal/admit)
// decides whether an upstream answer may be stored and for how long, for
// per-key and bulk fetches alike; answers (fit.go, its freshness in
// internal/fit) decides whether a stored or fetched entry may answer a
// given request, for every entry about to be served.
//
// It declares the few interfaces it needs of the cache tiers; it does not
// know how they are built.
package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sidecache/sidecache/internal/accesslog"
	"github.com/sidecache/sidecache/internal/bufpool"
	"github.com/sidecache/sidecache/internal/bulkelem"
	"github.com/sidecache/sidecache/internal/bulkmem"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/coalesce"
	"github.com/sidecache/sidecache/internal/edge"
	"github.com/sidecache/sidecache/internal/entrywrite"
	"github.com/sidecache/sidecache/internal/forward"
	"github.com/sidecache/sidecache/internal/hitforpass"
	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/idlebody"
	"github.com/sidecache/sidecache/internal/largebody"
	"github.com/sidecache/sidecache/internal/lean"
	"github.com/sidecache/sidecache/internal/metrics"
	"github.com/sidecache/sidecache/internal/passproxy"
	"github.com/sidecache/sidecache/internal/route"
	"github.com/sidecache/sidecache/internal/routeshape"
	"github.com/sidecache/sidecache/internal/spelling"
	"github.com/sidecache/sidecache/internal/splitlist"
	"github.com/sidecache/sidecache/internal/surrogate"
	"github.com/sidecache/sidecache/internal/tombstone"
	"github.com/sidecache/sidecache/internal/tunnel"
	"github.com/sidecache/sidecache/internal/upstreamlog"
	"github.com/sidecache/sidecache/internal/uptransport"
)

// Cache is what the proxy needs of the (tiered) store: a lookup that says
// which tier answered, and writes. cache.Tiered satisfies it.
type Cache interface {
	Lookup(ctx context.Context, key string) (*cache.Entry, cache.Tier, error)
	// LookupLocal reads this replica's own tier only (L1).
	LookupLocal(ctx context.Context, key string) (*cache.Entry, cache.Tier, error)
	// LookupShared reads the shared tier only (L2), for a leader that
	// knows L1 holds nothing under the key (exchange.emptyAt).
	LookupShared(ctx context.Context, key string) (*cache.Entry, cache.Tier, error)
	// LookupMany reads many keys with at most one L2 round trip.
	LookupMany(ctx context.Context, keys []string) ([]*cache.Entry, []cache.Tier, error)
	// Set returns nil only when at least one tier accepted the entry.
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
	// Lease takes key's lease; release(pass) lets its waiters go, pass >
	// 0 marking the key hit-for-pass for pass (lease.Leaser).
	Lease(ctx context.Context, key string, ttl time.Duration) (release func(pass time.Duration), acquired, released bool, err error)
	// WaitFill waits for an entry stored after newer (the zero time: any
	// entry), so a waiter holding a stale copy waits for a fresh one.
	// lapsed: the lease ended without its holder's release (the holder is
	// gone); the caller may take it over with Lease.
	WaitFill(ctx context.Context, key string, max time.Duration, newer time.Time) (e *cache.Entry, found, lapsed bool, err error)
}

// DefaultTunnelIdleTimeout is upstream.tunnel_idle_timeout's default
// (tunnel.DefaultIdleTimeout: Envoy's stream_idle_timeout).
const DefaultTunnelIdleTimeout = tunnel.DefaultIdleTimeout

// DefaultMaxTunnels is upstream.max_tunnels' default (tunnel.DefaultMax:
// NGINX's worker_connections default).
const DefaultMaxTunnels = tunnel.DefaultMax

// Options configure a Handler. Upstream and Routes are required.
type Options struct {
	Upstream *url.URL
	// Timeout bounds a whole upstream fetch on the cached path, the wait
	// for response headers on the pass-through path, and, on every path,
	// each wait for a body's next bytes (NGINX's proxy_read_timeout): a
	// long download that keeps coming is not cut, one that stalls is.
	Timeout             time.Duration
	MaxBodyBytes        int64
	MaxKeyBytes         int // longer cache keys pass through uncached; 0: 4 KiB
	MaxIdleConnsPerHost int
	// MaxHeaderBytes bounds the bytes of one upstream answer's header
	// sections, its 1xx answers' included (upstream.max_header_bytes);
	// 0: http.Transport's 10 MiB.
	MaxHeaderBytes int64
	// TunnelIdle bounds an upgraded connection (a 101's tunnel):
	// once no byte has crossed it either way for this long, both its
	// sides are closed (upstream.tunnel_idle_timeout; internal/tunnel).
	// 0: DefaultTunnelIdleTimeout.
	TunnelIdle time.Duration
	// MaxTunnels bounds the upgraded connections open at once
	// (upstream.max_tunnels; internal/tunnel): an upgrade request past it is
	// answered 503 without reaching the upstream. 0: DefaultMaxTunnels.
	MaxTunnels int
	// Via is the sidecar's pseudonym: a cached route's upstream request
	// carries "Via: 1.1 <Via>" (RFC 9110 §7.6.3), so that a loop back to
	// a sidecar is refused there (internal/edge). Pass-through requests
	// get it from edge.Guard, after the client's own Via. "": none.
	Via            string
	Transport      http.RoundTripper // nil: uptransport.New
	Routes         *route.Table
	Cache          Cache       // nil: nothing is cached
	Invalidator    Invalidator // nil: writes invalidate nothing
	Leaser         Leaser      // nil: coalescing is per replica
	TagHeaders     TagHeaders  // upstream headers naming surrogate keys (origintags.go)
	LeaseTTL       time.Duration
	Metrics        *metrics.Metrics // nil: a private registry
	Logger         *slog.Logger
	Now            func() time.Time
	TracerProvider trace.TracerProvider // nil: no spans (internal/tracing builds one)
}

// Handler is the proxy. It is safe for concurrent use; SetRoutes and
// SetUpstream swap their part of the configuration atomically (hot reload)
// without disturbing requests in flight.
type Handler struct {
	maxBody   int64
	maxKey    int
	idle      int
	maxHdr    int64
	tunIdle   time.Duration     // an upgraded connection's longest silence (internal/tunnel)
	tunnels   *tunnel.Slots     // the upgraded connections open (upstream.max_tunnels), across reloads
	transport http.RoundTripper // fixed by Options; nil: one per upstream config
	cache     Cache
	inv       Invalidator
	leaser    Leaser
	leaseTTL  atomic.Int64 // time.Duration; 0: upstream.timeout (leaseTTL in lease.go)
	m         *metrics.Metrics
	log       *slog.Logger
	now       func() time.Time
	tr        trace.Tracer // nil: tracing off (trace.go)

	state   atomic.Pointer[state]
	flights coalesce.Group[*flight]
	// refreshes are the forced refreshes (a client's no-cache): one per
	// key at a time, joined only by requests that arrived before it began.
	refreshes coalesce.Ordered[*flight]
	hfp       hitforpass.Set
	bufs      bufpool.Pool // copy buffers for pass-through and large bodies
	// refreshing holds the keys with a stale-while-revalidate refresh
	// under way, so a burst of stale hits starts one goroutine, not many.
	refreshing sync.Map
	tombs      *tombstone.Set
	tagh       surrogate.Headers // TagHeaders resolved once
	// stripTags is tagh.StripFrom, made once: a method value allocates
	// each time it is taken, and every cached request's relay takes it.
	stripTags func(http.Header)
	// trailers filters an upstream's trailers as its header is filtered:
	// the fields that may not be trailers (RFC 9110 §6.5.1) and the tag
	// headers. One func for the handler's life, so the lean path passes it
	// without allocating.
	trailers func(http.Header)
	via      []string                // the cached path's Via field; nil: none (read-only)
	ew       entrywrite.Options      // via and now, for answers written from an entry
	large    largebody.StreamOptions // how a too-large answer streams (largebody)
	upLog    *upstreamlog.Logger     // upstream failure lines
	// withheldLogged outlives reloads: a withheld header is logged once
	// per route and name in the life of the process.
	withheldLogged *forward.Logged
	// keptRules outlive reloads too: a route unchanged by one keeps
	// the forwarding it learned (forward.go).
	keptRules *keptRules
	// gzips are gzip writers for split lists (internal/splitlist).
	gzips splitlist.Gzip
}

// state is what a reload replaces as one: the upstream, the table and what
// was resolved for each of its routes.
type state struct {
	up        *url.URL
	timeout   time.Duration
	transport http.RoundTripper
	pass      *passproxy.Proxy
	lean      *lean.Client // nil: every pass-through takes pass (see passloop.go)
	table     *route.Table
	routes    map[*route.Route]*routeState
	noRoute   *routeState
}

// routeState is what every request of a route needs, resolved once per
// (re)load rather than looked up per request.
type routeState struct {
	rt      *route.Route
	m       *metrics.RouteMetrics
	batcher *batcher              // batch routes only
	bm      *metrics.BatchMetrics // batch routes only
	fwd     *forwarding
	// routeTag is RouteTag(rt.Name), which every entry it stores carries.
	routeTag string
	// notStoredLogged are the reasons an element of a bulk answer was not
	// stored that were logged already (element.go), at most five.
	notStoredLogged sync.Map
	// mem are the buffers the route's bulk answers are read into, and
	// the bytes of bulk answers and split lists the route holds
	// (internal/bulkmem).
	mem bulkmem.Route
	// heads are the element heads of the route's last bulk answer whose
	// elements could be stored (internal/bulkelem), for the next answer
	// with the same header.
	heads bulkelem.Memo
	// takeovers gathers the lease takeovers of the route's misses
	// (takeover.go); batch routes only.
	takeovers *takeovers
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
		maxBody:   opts.MaxBodyBytes,
		maxKey:    opts.MaxKeyBytes,
		idle:      opts.MaxIdleConnsPerHost,
		maxHdr:    opts.MaxHeaderBytes,
		tunIdle:   opts.TunnelIdle,
		transport: opts.Transport,
		cache:     opts.Cache,
		inv:       opts.Invalidator,
		leaser:    opts.Leaser,
		m:         opts.Metrics,
		log:       opts.Logger,
		now:       opts.Now,
		bufs:      bufpool.New(),
		tagh:      surrogate.New(opts.TagHeaders),
	}
	h.leaseTTL.Store(int64(opts.LeaseTTL))
	if h.maxBody <= 0 {
		h.maxBody = 8 << 20
	}
	if h.maxHdr <= 0 {
		h.maxHdr = lean.DefaultMaxHeaderBytes
	}
	if h.maxKey <= 0 {
		h.maxKey = 4 << 10
	}
	if h.tunIdle <= 0 {
		h.tunIdle = DefaultTunnelIdleTimeout
	}
	h.tunnels = tunnel.NewSlots(opts.MaxTunnels)
	if h.m == nil {
		h.m = metrics.New(nil)
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	if opts.Via != "" {
		h.via = []string{"1.1 " + opts.Via}
	}
	h.ew = entrywrite.Options{Via: h.via, Now: h.now}
	h.stripTags = h.tagh.StripFrom
	h.trailers = func(t http.Header) {
		httpcache.RemoveForbiddenTrailers(t)
		h.tagh.StripFrom(t)
	}
	h.large = largebody.StreamOptions{Strip: h.stripTags, Via: h.via, Trailers: h.trailers, Bufs: h.bufs}
	h.upLog = upstreamlog.New(h.log, h.now)
	h.withheldLogged = forward.NewLogged()
	h.keptRules = newKeptRules()
	h.setTracing(opts.TracerProvider)
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	h.tombs = tombstone.New(tombWindow(timeout))
	h.tombs.OnFold(h.m.TombstonesFolded)
	st := h.withUpstream(&state{}, opts.Upstream, timeout)
	h.state.Store(h.withRoutes(st, opts.Routes))
	return h, nil
}

// tombWindow is how long an invalidation is remembered: the longest fetch
// (the upstream timeout) plus the time a peer's L2 write may lag.
func tombWindow(timeout time.Duration) time.Duration { return timeout + 10*time.Second }

// SetRoutes swaps the route table. A batch route whose batch settings
// are unchanged keeps its batcher (keptBatching); the other batchers of
// the old table finish the batches they hold, and new requests use the
// new ones.
func (h *Handler) SetRoutes(t *route.Table) {
	h.state.Store(h.withRoutes(h.state.Load(), t))
}

// SetUpstream swaps the upstream and its timeout (hot reload). Requests in
// flight finish against the old one.
func (h *Handler) SetUpstream(u *url.URL, timeout time.Duration) error {
	if u == nil || u.Scheme == "" || u.Host == "" {
		return errors.New("proxy: upstream url is required")
	}
	if timeout <= 0 {
		return errors.New("proxy: upstream timeout must be > 0")
	}
	old := h.state.Load()
	// Before the new timeout lets a fetch run longer than the tombstones
	// last.
	h.tombs.Widen(tombWindow(timeout))
	h.state.Store(h.withUpstream(old, u, timeout))
	if t, ok := old.transport.(interface{ CloseIdleConnections() }); ok && h.transport == nil {
		t.CloseIdleConnections()
	}
	old.lean.CloseIdle()
	return nil
}

// SetLeaseTTL swaps cache.l2.lease_ttl (hot reload; 0: upstream.timeout).
// Leases taken before keep the hold they were taken with.
func (h *Handler) SetLeaseTTL(d time.Duration) { h.leaseTTL.Store(int64(d)) }

// LeaseTTL is the cache.l2.lease_ttl in force (0: upstream.timeout).
func (h *Handler) LeaseTTL() time.Duration { return time.Duration(h.leaseTTL.Load()) }

// Routes is the table in force.
func (h *Handler) Routes() *route.Table { return h.state.Load().table }

func (h *Handler) withUpstream(old *state, u *url.URL, timeout time.Duration) *state {
	st := *old
	st.up, st.timeout, st.transport = u, timeout, h.transport
	if st.transport == nil {
		st.transport = uptransport.New(timeout, h.idle, h.maxHdr)
	}
	// The rules every call through the Transport keeps, its bodies and
	// tunnels bounded (internal/uptransport, internal/idlebody).
	st.transport = uptransport.Wrap(st.transport, idlebody.Options{Body: timeout, Tunnel: h.tunIdle, Slots: h.tunnels, TunnelCut: h.countTunnelCut})
	st.pass = h.newPassProxy(u, st.transport, timeout)
	st.lean = nil
	if h.transport == nil {
		st.lean = lean.New(u, timeout, h.idle, h.maxHdr)
	}
	return &st
}

// countTunnelCut counts a tunnel cut for its silence, with the edge's
// cuts: it is the client's connection that ends.
func (h *Handler) countTunnelCut() { h.m.EdgeRefused(edge.ReasonTunnelIdle) }

// send makes a cached-path upstream call (out from outgoing) on the
// caller's goroutine over the lean pool when it takes out (lean.Client
// TakesOut: a plain-HTTP upstream, a GET with no client trace), the same
// bytes on the wire and the same answer as the Transport's (lean/out.go);
// otherwise by the Transport. Either way the caller reads and closes the
// body: a body read to its end frees the connection for reuse, any other
// closes it.
func (st *state) send(out *http.Request) (*http.Response, error) {
	if st.lean.TakesOut(out) {
		return st.lean.Send(out, nil)
	}
	return st.transport.RoundTrip(out)
}

func (h *Handler) withRoutes(old *state, t *route.Table) *state {
	st := *old
	st.table = t
	st.routes = make(map[*route.Route]*routeState, len(t.Routes()))
	for _, rt := range t.Routes() {
		fwd := h.keptRules.forwarding(rt, h.log, h.withheldLogged) // what it learned, across reloads
		rs := &routeState{rt: rt, m: h.m.RouteShaped(rt.Name, routeshape.Of(rt, h.leaser != nil)), fwd: fwd, routeTag: RouteTag(rt.Name)}
		if rt.Batch != nil {
			rs.bm = rs.m.Batch(bulkelem.Reasons()...)
			if kept := keptBatching(old, rt); kept != nil {
				rs.batcher, rs.takeovers = kept.batcher, kept.takeovers
			} else {
				rs.batcher = h.newBatcher(rs)
				rs.takeovers = newTakeovers()
			}
		}
		st.routes[rt] = rs
	}
	st.noRoute = &routeState{m: h.m.RouteShaped(metrics.PassRoute, metrics.Shape{Results: []metrics.Result{metrics.Pass}})}
	return &st
}

// keptBatching is the state of old's route that rt keeps the batcher (and
// lease takeovers) of across a reload: the route of rt's name whose batch
// and negative_ttl (its quarantine's length) are rt's, as NGINX keeps a
// shared memory zone of the same name and size across a reload. The
// batcher holds each group's calls in flight, queued ids and quarantine:
// made anew at each reload, the bulk calls of the old table's batcher and
// the new one's went together, past max_in_flight and
// max_route_in_flight, and the ids a quarantine kept apart (internal/batch)
// joined shared calls again at once, each failing them anew. A route whose
// batch settings changed gets a new batcher, and the old one's calls in
// flight end under the old bounds (nil: none kept).
func keptBatching(old *state, rt *route.Route) *routeState {
	if old.table == nil {
		return nil
	}
	o := old.table.Route(rt.Name)
	if o == nil || o.Batch == nil || *o.Batch != *rt.Batch || o.NegativeTTL != rt.NegativeTTL {
		return nil
	}
	if rs := old.routes[o]; rs != nil && rs.batcher != nil {
		return rs
	}
	return nil
}

// ServeHTTP is the classify stage: it decides which path the request takes
// and hands it an exchange.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	st := h.state.Load()
	x := exchange{h: h, st: st, w: w, r: r, start: h.now(), rec: accesslog.FromContext(r.Context())}
	var scratch [4]route.Param
	rt, params, ok := st.table.MatchAppend(scratch[:0], r.Method, r.URL.Path)
	if x.rec != nil && ok {
		x.rec.Route = rt.Name
	}
	if !ok {
		x.rs = st.noRoute
		switch {
		case httpcache.MisspelledMethod(r.Method):
			// No route lists it (routes list methods in upper case), so
			// it is refused here, whatever path its upper case takes.
			x.refuseMethodCase()
		case httpcache.SafeMethod(r.Method) && httpcache.Overridden(r.Header):
			x.refuseOverride()
		case httpcache.SafeMethod(r.Method):
			x.pass(outPass, "no-route")
		default:
			x.write(outPass, "no-route") // RFC 9111 §4.4, and other spellings' routes (invalidate.go)
		}
		return
	}
	x.rs = st.routes[rt]
	x.params.set(params)
	h.traceRoute(r, rt)
	switch {
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		x.write(outWrite, "")
	case httpcache.Overridden(r.Header):
		x.refuseOverride()
	case h.cache == nil || !rt.Cacheable() && rt.Split == nil:
		x.pass(outPass, "uncached-route")
	case rt.Split != nil:
		x.split()
	case !canonicalSpelling(r.URL.Path, params):
		x.pass(outBypass, "non-canonical") // strict for storage (internal/spelling)
	default:
		if reason := httpcache.BypassReason(r, rt.Key.Headers); reason != "" {
			x.pass(outBypass, reason)
			return
		}
		x.key = cachekey.Build(r, &rt.Key)
		switch {
		case len(x.key) > h.maxKey:
			x.pass(outBypass, "key-too-long")
		case x.passes():
			x.pass(outBypass, "hit-for-pass")
		default:
			x.cached()
		}
	}
}

// canonicalSpelling reports whether a read is spelled the one way the
// cache stores it: no empty or dot segments, no ";params", no number with
// a sign, leading zeros or blanks around it in a route param (a slug that
// reads as a number is stored, tagged also as that number: tagEntry). Any other spelling passes
// through uncached, so one resource is one entry and one set of tags; a
// write under any spelling still invalidates it (invalidate.go).
func canonicalSpelling(path string, params route.Params) bool {
	if !spelling.CanonicalPath(path) {
		return false
	}
	for _, p := range params {
		if !spelling.CanonicalParam(p.Value) {
			return false
		}
	}
	return true
}

// Invalidated records that tags were invalidated now (by a write here, a
// purge, or a peer's message), so that fetches begun before now are not
// stored or served. The caller drops the stored entries themselves.
func (h *Handler) Invalidated(tags ...string) { h.tombs.Add(h.now(), tags...) }

// InvalidatedAll is Invalidated for a purge of everything.
func (h *Handler) InvalidatedAll() { h.tombs.AddAll(h.now()) }

// Keeps reports whether e may be written to a tier: no invalidation of
// one of its tags, nor of everything, has been recorded (Invalidated)
// since e's request left. The tiers ask it under L1's lock right before
// they write (cache.TieredOptions.Keep), for a fetched answer and for an
// L2 hit copied into L1 alike: checked before that lock only (admit), an
// entry whose invalidation landed in between was written after L1's
// DeleteTags and served once the tombstones lapsed.
func (h *Handler) Keeps(e *cache.Entry) bool { return !h.tombs.Stale(e, h.now()) }

// RouteTag is the implicit tag every entry of a route carries, so that a
// purge by route is a purge by tag. Tags starting with "_" are reserved.
func RouteTag(name string) string { return "_route:" + name }
