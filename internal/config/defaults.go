package config

import (
	"strconv"
	"strings"
	"time"
)

// setDefaults fills what the file left out. isSet tells an absent field
// from an explicit zero, which matters where zero means something
// (cache.l1.max_bytes: 0 disables L1) or is a mistake worth reporting
// (timeout: 0s).
func setDefaults(c *Config, isSet func(path string) bool) {
	dur := func(d *Duration, path string, v time.Duration) {
		if !isSet(path) {
			*d = Duration(v)
		}
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.Admin.Listen == "" {
		c.Admin.Listen = "127.0.0.1:9090"
	}
	// The token is read as a client can present it: an Authorization
	// value carries no surrounding blanks (RFC 9110 §5.5; the admin
	// handler trims what it is sent). A Kubernetes Secret made from a
	// file keeps the file's final newline, which a quoted
	// "${SIDECACHE_ADMIN_TOKEN:-}" folds into a trailing space (YAML 1.2
	// §7.3.1): kept, no presented token could ever match it.
	c.Admin.Token = strings.TrimSpace(c.Admin.Token)
	dur(&c.Server.ReadHeaderTimeout, "server.read_header_timeout", 10*time.Second)
	dur(&c.Server.ReadTimeout, "server.read_timeout", 60*time.Second)
	dur(&c.Server.IdleTimeout, "server.idle_timeout", 120*time.Second)
	if !isSet("server.max_header_bytes") {
		c.Server.MaxHeaderBytes = 64 << 10
	}
	dur(&c.Server.WriteTimeout, "server.write_timeout", 60*time.Second)
	if !isSet("server.max_connections") {
		c.Server.MaxConnections = 4096 // connlimit.DefaultMax
	}
	if !isSet("server.max_pending_send_bytes") {
		c.Server.MaxPendingSendBytes = 64 << 20 // sendbudget.DefaultMax
	}
	if !isSet("server.max_pending_header_bytes") {
		c.Server.MaxPendingHeaderBytes = 32 << 20 // headerbudget.DefaultMax
	}
	if !isSet("server.via") {
		c.Server.Via = "sidecache"
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	c.Log.Format, c.Log.Level = strings.ToLower(c.Log.Format), strings.ToLower(c.Log.Level)
	dur(&c.Coherence.MaxLag, "coherence.max_lag", time.Second)
	dur(&c.Coherence.WriteHold, "coherence.write_hold", c.Coherence.MaxLag.D())
	dur(&c.Upstream.Timeout, "upstream.timeout", 10*time.Second)
	dur(&c.Upstream.TunnelIdleTimeout, "upstream.tunnel_idle_timeout", 5*time.Minute)
	if !isSet("upstream.max_tunnels") {
		c.Upstream.MaxTunnels = 1024
	}
	if !isSet("upstream.max_idle_conns_per_host") {
		c.Upstream.MaxIdleConnsPerHost = 256
	}
	if !isSet("upstream.max_header_bytes") {
		c.Upstream.MaxHeaderBytes = 10 << 20
	}
	if !isSet("cache.max_body_bytes") {
		c.Cache.MaxBodyBytes = 8 << 20
	}
	if !isSet("cache.max_key_bytes") {
		c.Cache.MaxKeyBytes = 4 << 10
	}
	if !isSet("cache.l1.max_bytes") {
		c.Cache.L1.MaxBytes = 256 << 20
	}
	if !isSet("cache.tag_headers") {
		c.Cache.TagHeaders = []string{"Surrogate-Key", "xkey"}
	}
	if c.Cache.StripTagHeaders == nil {
		on := true
		c.Cache.StripTagHeaders = &on
	}
	if l2 := c.Cache.L2; l2 != nil {
		if !isSet("cache.l2.redis.prefix") {
			l2.Redis.Prefix = "sidecache:"
		}
		dur(&l2.Redis.Timeout, "cache.l2.redis.timeout", 100*time.Millisecond)
		if l2.Lease == nil {
			on := true
			l2.Lease = &on
		}
		// A lease outliving the upstream timeout would only make waiters
		// wait for a fetch that has already given up.
		dur(&l2.LeaseTTL, "cache.l2.lease_ttl", c.Upstream.Timeout.D())
	}
	for i := range c.Routes {
		r := &c.Routes[i]
		p := "routes[" + strconv.Itoa(i) + "]"
		if r.Methods == nil {
			r.Methods = []string{"GET", "HEAD"}
		}
		for j, m := range r.Methods {
			r.Methods[j] = strings.ToUpper(m)
		}
		if r.Freshness == "" {
			r.Freshness = "route"
		}
		if r.ForwardHeaders == "" {
			r.ForwardHeaders = "keyed"
		}
		if r.RequestNoCache == "" {
			r.RequestNoCache = "ignore"
			if r.Freshness == "origin" {
				r.RequestNoCache = "refresh"
			}
		}
		switch lower := strings.ToLower(r.Key.Host); lower {
		case "":
			r.Key.Host = "request"
		case "request", "none":
			r.Key.Host = lower
		default:
			r.Key.Host = lower // hosts compare case-insensitively (RFC 3986 §3.2.2)
		}
		if b := r.Batch; b != nil {
			if !isSet(p + ".batch.max_size") {
				b.MaxSize = 100
			}
			dur(&b.MaxWait, p+".batch.max_wait", 2*time.Millisecond)
			if !isSet(p + ".batch.max_in_flight") {
				b.MaxInFlight = 2
			}
			if !isSet(p + ".batch.max_route_in_flight") {
				// Room for a few groups' calls at once (a couple of
				// Host spellings, a keyed header's few values) at
				// their full max_in_flight; the proxy's default too.
				b.MaxRouteInFlight = 4 * max(b.MaxInFlight, 1)
			}
		}
		if s := r.Split; s != nil && !isSet(p+".split.max_ids") {
			s.MaxIDs = 1000
		}
	}
	dur(&c.ShutdownTimeout, "shutdown_timeout", 25*time.Second)
}
