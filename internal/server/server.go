// Package server is the wiring: it turns a validated config into the
// packages' own options, runs the proxy and admin listeners, reloads routes
// on SIGHUP or a changed file, and shuts down gracefully. Nothing imports it
// but cmd/sidecache.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sidecache/sidecache/internal/admin"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/cache/l2"
	"github.com/sidecache/sidecache/internal/config"
	"github.com/sidecache/sidecache/internal/connlimit"
	"github.com/sidecache/sidecache/internal/edge"
	"github.com/sidecache/sidecache/internal/headerbudget"
	"github.com/sidecache/sidecache/internal/lograte"
	"github.com/sidecache/sidecache/internal/metrics"
	"github.com/sidecache/sidecache/internal/proxy"
	"github.com/sidecache/sidecache/internal/sendbudget"
	"github.com/sidecache/sidecache/internal/tracing"
)

// Options are what the command line adds to the config.
type Options struct {
	ConfigPath string // watched for changes; "" = no reload from disk
	Version    string
	Logger     *slog.Logger
	// WatchInterval is how often the config file is checked for a change
	// (a Kubernetes ConfigMap update is a symlink swap, which inotify on
	// the file itself would miss); 0 = 2s, negative = never. A change is
	// applied once two checks in a row read it the same (watch.go).
	WatchInterval time.Duration
	// Level, when set, is the process logger's level: a reload sets it
	// from log.level. nil leaves the level alone (-log-level pins it).
	Level *slog.LevelVar
	// AccessLog receives the access lines while log.access is on; nil
	// uses Logger.
	AccessLog *slog.Logger
	// Now is the clock of the proxy and the L1 tier (entry ages and
	// freshness); nil is time.Now. Tests move it to age entries.
	Now func() time.Time
}

// Server owns the two listeners and everything behind them.
type Server struct {
	cfg   atomic.Pointer[config.Config]
	opts  Options
	log   *slog.Logger
	reg   *prometheus.Registry
	m     *metrics.Metrics
	l1    *l1.Store
	l2    *l2.Store
	tiers *cache.Tiered
	inv   *invalidator
	proxy *proxy.Handler
	// live is proxy for the L2 subscriber's goroutine, which starts (in
	// l2.New) before proxy is built: an atomic store, so that it never
	// reads a half-set field.
	live atomic.Pointer[proxy.Handler]

	proxyLn, adminLn net.Listener
	proxySrv         *http.Server
	adminSrv         *http.Server
	// conns bounds the proxy listener's connections
	// (server.max_connections; reloaded in place). The admin listener
	// has no such bound: it stays reachable while the proxy's is full.
	conns *connlimit.Limiter
	// sends bounds the bytes the proxy listener's waiting writes hold
	// (server.max_pending_send_bytes; reloaded in place).
	sends *sendbudget.Budget
	// heads bounds what both listeners' unfinished header sections hold
	// (server.max_pending_header_bytes): one budget, as the memory is
	// the process's.
	heads *headerbudget.Budget

	draining atomic.Bool
	reloadMu sync.Mutex
	watched  configWatch // guarded by reloadMu (watch.go)
	// served are the routes in force since start, for a purge of
	// everything (watch.go).
	served servedRoutes
	// traceShutdown flushes the spans still queued (a no-op with tracing off).
	traceShutdown func(context.Context) error
}

// New builds the server from a validated config. It does not listen yet.
func New(ctx context.Context, cfg *config.Config, opts Options) (*Server, error) {
	s := &Server{opts: opts, log: opts.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	// Every line kind is bounded (internal/lograte): a line a request
	// writes, while Redis is down or an upstream misbehaves, comes at the
	// request rate. The access log is the exception, line per request by
	// design, and is not this logger.
	s.log = slog.New(lograte.NewHandler(s.log.Handler(), logLines, logEvery, opts.Now))
	s.cfg.Store(cfg)
	s.reg = prometheus.NewRegistry()
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.m = metrics.New(s.reg)
	s.m.SetBuildInfo(opts.Version)
	s.conns = connlimit.New(cfg.Server.MaxConnections, s.m)
	s.m.ConnSource(s.conns.Open, func() int64 { return int64(s.conns.Max()) })
	s.sends = sendbudget.New(cfg.Server.MaxPendingSendBytes.Bytes())
	s.m.SendSource(s.sends.Held, s.sends.Writes, s.sends.Max)
	s.heads = headerbudget.New(cfg.Server.MaxPendingHeaderBytes.Bytes())
	s.m.HeaderSource(s.heads.Held, s.heads.Conns, s.heads.Max)

	var l1s, l2s cache.Store
	if n := cfg.Cache.L1.MaxBytes.Bytes(); n > 0 {
		st, err := l1.New(l1.Options{MaxBytes: n, Now: opts.Now})
		if err != nil {
			return nil, fmt.Errorf("server: l1: %w", err)
		}
		s.l1, l1s = st, st
		s.m.L1Source(st.Bytes, st.Items)
	}
	if c := cfg.Cache.L2; c != nil {
		st, err := l2.New(ctx, l2.Options{
			Addrs:          c.Redis.Addrs,
			MasterName:     c.Redis.MasterName,
			Cluster:        c.Redis.Cluster,
			Username:       c.Redis.Username,
			Password:       c.Redis.Password,
			DB:             c.Redis.DB,
			Prefix:         c.Redis.Prefix,
			Timeout:        c.Redis.Timeout.D(),
			Logger:         s.log.With("tier", "l2"),
			OnStateChange:  s.l2State,
			OnInvalidate:   s.peerInvalidation,
			MaxLag:         cfg.Coherence.MaxLag.D(),
			ShardedPubSub:  c.Redis.ShardedPubSub,
			SubscribeAddrs: c.Redis.SubscribeAddrs,
		})
		if err != nil {
			s.closeTiers()
			return nil, fmt.Errorf("server: l2: %w", err)
		}
		s.l2, l2s = st, st
		// sidecache_l2_writes_refused says what /readyz's "writes
		// refused" says (Ready): sidecache_l2_up keeps its meaning, Redis
		// answers, which it does.
		s.m.L2Source(st.ClockOffset, st.Refusals, func() bool {
			_, refused := st.WritesRefusedSince()
			return refused && st.Up()
		})
	}
	// Without L2, sidecache_l2_up stays absent: 0 would fire
	// SidecacheL2Down on every pod that has no Redis by design.
	topts := cache.TieredOptions{
		Observe: func(t cache.Tier, r cache.Result) { s.m.Lookup(string(t), string(r)) },
		Now:     opts.Now,
		// The proxy's tombstones, asked under L1's lock: no entry
		// requested before an invalidation applied here is written
		// after it (a fill's store, an L2 hit's promote).
		Keep: func(e *cache.Entry) bool {
			h := s.live.Load()
			return h == nil || h.Keeps(e)
		},
	}
	if s.l2 != nil {
		topts.MaxLag, topts.Proven, topts.Floor = cfg.Coherence.MaxLag.D(), s.l2.Proven, s.l2.Floor
		topts.Refused = func(t cache.Tier) { s.m.CoherenceRefused(string(t)) }
	}
	s.tiers = cache.NewTiered(l1s, l2s, topts)
	s.m.Tiers(l1s != nil, l2s != nil)
	s.inv = newInvalidator(s.l1, s.l2, cfg.Coherence.WriteHold.D(), s.m, s.routeTags)

	table, err := compileRoutes(cfg.Routes)
	if err != nil {
		s.closeTiers()
		return nil, err
	}
	s.served.add(table)
	s.startWatch()
	up, err := url.Parse(cfg.Upstream.URL)
	if err != nil {
		s.closeTiers()
		return nil, fmt.Errorf("server: upstream.url: %w", err)
	}
	popts := proxy.Options{
		Upstream:            up,
		Timeout:             cfg.Upstream.Timeout.D(),
		MaxBodyBytes:        cfg.Cache.MaxBodyBytes.Bytes(),
		MaxKeyBytes:         int(cfg.Cache.MaxKeyBytes.Bytes()),
		MaxIdleConnsPerHost: cfg.Upstream.MaxIdleConnsPerHost,
		MaxHeaderBytes:      cfg.Upstream.MaxHeaderBytes.Bytes(),
		TunnelIdle:          cfg.Upstream.TunnelIdleTimeout.D(),
		MaxTunnels:          cfg.Upstream.MaxTunnels,
		Via:                 cfg.Server.Via,
		Routes:              table,
		Invalidator:         s.inv,
		TagHeaders:          proxy.TagHeaders{Names: cfg.Cache.TagHeaders, Strip: cfg.Cache.StripTagHeaders == nil || *cfg.Cache.StripTagHeaders},
		Metrics:             s.m,
		Logger:              s.log.With("component", "proxy"),
		Now:                 opts.Now,
	}
	// Always a cache, even with both tiers off: coalescing and batching
	// still work; an empty Tiered simply misses and stores nothing.
	popts.Cache = s.tiers
	if s.l2 != nil && (cfg.Cache.L2.Lease == nil || *cfg.Cache.L2.Lease) {
		popts.Leaser, popts.LeaseTTL = s.l2, cfg.Cache.L2.LeaseTTL.D()
	}
	// Tracing is on only when the OTEL_* environment asks (docs/tracing.md).
	tp, traceShutdown, err := tracing.New(ctx, tracing.Options{Version: opts.Version})
	if err != nil {
		s.closeTiers()
		return nil, fmt.Errorf("server: %w", err)
	}
	s.traceShutdown, popts.TracerProvider = traceShutdown, tp
	if s.proxy, err = proxy.New(popts); err != nil {
		_ = traceShutdown(ctx)
		s.closeTiers()
		return nil, fmt.Errorf("server: %w", err)
	}
	s.live.Store(s.proxy)
	access := opts.AccessLog
	if access == nil {
		access = opts.Logger // unbounded: a line per request
		if access == nil {
			access = slog.Default()
		}
	}
	eo := edge.Options{Via: cfg.Server.Via, AllowTrace: cfg.Server.AllowTrace, Upgrades: cfg.Upstream.AllowUpgrades, Count: s.m, Keyed: s.keyed}
	s.m.EdgeReasons(edge.Reasons(eo, cfg.Server.WriteTimeout.D())...)
	guard := edge.NewGuard(s.proxy, eo)
	s.proxySrv = s.httpServer(tracing.Handler(accessLog(guard, func() config.Log { return s.cfg.Load().Log }, access), tp), cfg.Server)
	s.adminSrv = s.httpServer(admin.Handler(admin.Options{
		TokenFunc: func() string { return s.cfg.Load().Admin.Token }, // reloadable
		Gatherer:  s.reg,
		Ready:     s,
		Purger:    &purger{s: s},
		Inspector: &inspector{s: s},
		Routes:    func() any { return s.proxy.Routes().Routes() },
		Logger:    s.log.With("component", "admin"),
		PProf:     cfg.Admin.PProf,
	}), cfg.Server)
	return s, nil
}

// httpServer bounds what one client may hold of a listener, the same on
// both: a request whose headers or body trickle in is cut at the deadline
// (and the upstream request it feeds is cancelled with it), an idle
// keep-alive connection is closed, and a header block over the limit is
// answered 431 (RFC 6585 §5) at the limit itself, not 4 KiB past it
// (edge.Wire), with a lingering close, as after net/http's other
// refusals and any close while a client may still be sending, so that
// the client reads its answer (edge's linger.go).
// A client that stops reading is cut at write_timeout (the listener's
// connections, internal/edge), the connection reaches the handler
// (edge.Wire) for the framing the handler could not otherwise see, and
// what net/http answers itself is counted.
func (s *Server) httpServer(h http.Handler, c config.Server) *http.Server {
	return edge.Wire(&http.Server{
		Handler:           h,
		ReadHeaderTimeout: c.ReadHeaderTimeout.D(),
		ReadTimeout:       c.ReadTimeout.D(),
		IdleTimeout:       c.IdleTimeout.D(),
		MaxHeaderBytes:    int(c.MaxHeaderBytes.Bytes()),
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	})
}

func (s *Server) l2State(up bool) {
	s.m.SetL2Up(up)
	if up {
		s.log.Info("l2 reachable")
	} else {
		s.log.Warn("l2 degraded: serving from l1 and upstream")
	}
}

// Listen opens both listeners (so tests can use port 0 and read the
// addresses before Serve).
func (s *Server) Listen() error {
	cfg := s.cfg.Load()
	var err error
	if s.proxyLn, err = net.Listen("tcp", cfg.Listen); err != nil {
		return fmt.Errorf("server: listen: %w", err)
	}
	if s.adminLn, err = net.Listen("tcp", cfg.Admin.Listen); err != nil {
		s.proxyLn.Close()
		return fmt.Errorf("server: admin.listen: %w", err)
	}
	// Again with the bound addresses (a port chosen at start, a host
	// name resolved): an upstream that is one of our listeners loops.
	if u, err := url.Parse(cfg.Upstream.URL); err == nil && u.Port() != "" {
		for _, ln := range []net.Listener{s.proxyLn, s.adminLn} {
			if config.SameAddress(ln.Addr().String(), u.Hostname(), u.Port()) {
				s.proxyLn.Close()
				s.adminLn.Close()
				return fmt.Errorf("server: upstream.url %s is the sidecar's own listener %s: every request would loop", cfg.Upstream.URL, ln.Addr())
			}
		}
	}
	wt := cfg.Server.WriteTimeout.D()
	s.proxyLn, s.adminLn = edge.CappedListener(s.proxyLn, wt, s.m, s.conns, s.sends), edge.Listener(s.adminLn, wt, s.m)
	s.proxyLn, s.adminLn = edge.WithHeaderBudget(s.proxyLn, s.heads), edge.WithHeaderBudget(s.adminLn, s.heads)
	return nil
}

// ProxyAddr and AdminAddr are the bound addresses after Listen.
func (s *Server) ProxyAddr() string { return s.proxyLn.Addr().String() }
func (s *Server) AdminAddr() string { return s.adminLn.Addr().String() }

// Run serves until ctx ends, then drains: /readyz fails first (for
// shutdown_delay, so a load balancer stops sending), in-flight requests
// finish within shutdown_timeout, and the tiers close.
func (s *Server) Run(ctx context.Context) error {
	if s.proxyLn == nil {
		if err := s.Listen(); err != nil {
			return err
		}
	}
	errc := make(chan error, 2)
	go func() { errc <- serve(s.proxySrv, s.proxyLn) }()
	go func() { errc <- serve(s.adminSrv, s.adminLn) }()
	stopReplay, replayed := make(chan struct{}), make(chan struct{})
	if s.l2 != nil {
		// Every MaxLag/8: a peer proves its channel again only after
		// 3/4 MaxLag of heartbeats (l2's heartbeat.go), by when a retry has run.
		every := max(s.cfg.Load().Coherence.MaxLag.D()/8, time.Millisecond)
		go func() {
			defer close(replayed)
			s.inv.replay(stopReplay, every, s.log.With("component", "invalidate"))
		}()
	} else {
		close(replayed)
	}
	if s.opts.ConfigPath != "" && s.opts.WatchInterval >= 0 {
		go s.watch(ctx)
	}
	s.log.Info("sidecache listening", "proxy", "http://"+s.ProxyAddr(), "admin", "http://"+s.AdminAddr(), "upstream", s.cfg.Load().Upstream.URL)

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	cfg := s.cfg.Load()
	s.draining.Store(true)
	if d := cfg.ShutdownDelay.D(); d > 0 && runErr == nil {
		s.log.Info("draining: readiness off", "delay", d)
		time.Sleep(d)
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout.D())
	defer cancel()
	err := s.proxySrv.Shutdown(sctx)
	_ = s.adminSrv.Shutdown(sctx)
	// The replay loop's last pass runs after the listeners have drained, so
	// invalidations of the last writes still reach Redis (within the drain).
	close(stopReplay)
	select {
	case <-replayed:
	case <-sctx.Done():
	}
	if err := s.traceShutdown(sctx); err != nil {
		s.log.Warn("tracing: spans not flushed", "err", err)
	}
	s.closeTiers()
	if runErr != nil {
		return runErr
	}
	if err != nil {
		return fmt.Errorf("server: drain: %w", err)
	}
	return nil
}

func serve(srv *http.Server, ln net.Listener) error {
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("server: serve %s: %w", ln.Addr(), err)
	}
	return nil
}

func (s *Server) closeTiers() {
	if s.l2 != nil {
		s.l2.Close()
	}
	if s.l1 != nil {
		s.l1.Close()
	}
}

// Ready implements admin.Readiness. A degraded L2 keeps the pod ready: the
// sidecar still answers from L1 and the upstream (docs/admin-api.md,
// GET /readyz).
func (s *Server) Ready() (bool, map[string]string) {
	d := map[string]string{"config": "loaded", "l2": "disabled"}
	if s.l2 != nil {
		d["l2"] = "up"
		if !s.l2.Up() {
			d["l2"] = "degraded"
		} else if _, refused := s.l2.WritesRefusedSince(); refused {
			// Redis answers but takes no write (MISCONF, NOREPLICAS,
			// READONLY, OOM): L2 is read, nothing is stored in it.
			d["l2"], d["reason"] = "degraded", "writes refused"
		}
		s.coherence(d)
	}
	if s.draining.Load() {
		d["state"] = "draining"
		return false, d
	}
	return true, d
}

// coherence names in d whether this replica can prove it hears its peers'
// invalidations (docs/admin-api.md, GET /readyz), as the tiers use that
// proof (cache.Tiered): "proven" while an entry older than
// coherence.max_lag may be served, "unproven" while only younger ones are.
// After a gap the proof covers only entries fetched after the floor, so
// for max_lag after it every entry that may be served is younger than
// max_lag however fresh the proof: that is "unproven" too, and
// "coherence_floor" says when the gap ended. It stays ready either way:
// answering from the upstream is slower, not wrong.
func (s *Server) coherence(d map[string]string) {
	now := time.Now()
	if s.opts.Now != nil {
		now = s.opts.Now()
	}
	p := s.l2.Proof()
	horizon := now.Add(-s.cfg.Load().Coherence.MaxLag.D())
	d["coherence"] = "unproven"
	if p.Proven.After(horizon) && p.Floor.Before(horizon) {
		d["coherence"] = "proven"
	}
	if !p.Floor.IsZero() {
		d["coherence_floor"] = p.Floor.UTC().Format(time.RFC3339Nano)
	}
	if p.Skewed {
		d["clock"] = "skewed" // l2 neither read nor stored (l2's skew.go)
	}
}

// Metrics is the registry the admin listener exposes (for tests).
func (s *Server) Metrics() *metrics.Metrics { return s.m }
