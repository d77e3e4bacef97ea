// Package config turns the operator's YAML into plain typed data. It expands
// ${VAR} and ${VAR:-default}, fills defaults, and validates once, joining
// every problem with its field path. Nothing here does I/O beyond reading
// the file; other packages never see this type (server maps it to their own
// options).
package config

import "time"

// Config is the whole file. docs/configuration.md documents every field;
// extend compatibly and document what you add there.
type Config struct {
	Listen    string    `yaml:"listen"`
	Server    Server    `yaml:"server"`
	Admin     Admin     `yaml:"admin"`
	Log       Log       `yaml:"log"`
	Upstream  Upstream  `yaml:"upstream"`
	Cache     Cache     `yaml:"cache"`
	Coherence Coherence `yaml:"coherence"`
	Routes    []Route   `yaml:"routes"`

	// ShutdownTimeout bounds the drain of in-flight requests on SIGTERM.
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`
	// ShutdownDelay is how long /readyz reports not-ready before the
	// listeners close, so Kubernetes stops sending traffic first.
	ShutdownDelay Duration `yaml:"shutdown_delay"`

	// defaulted are the fields of defaultFrom the file left out, whose
	// value is thus another field's (Follows). Not a field of the file.
	defaulted map[string]bool
}

// Follows reports whether the file left path out and its value is the
// default copied from another field, source (coherence.write_hold from
// coherence.max_lag, cache.l2.lease_ttl from upstream.timeout): a change
// of source alone changes it too. A Config not made by Parse follows
// nothing.
func (c *Config) Follows(path string) (source string, ok bool) {
	source, derived := defaultFrom[path]
	return source, derived && c.defaulted[path]
}

// Server bounds what one client may hold of a listener: a slow or endless
// request is cut instead of pinning a connection (and, on the cached path,
// an upstream request) forever. Both listeners use these values.
type Server struct {
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"`
	// ReadTimeout covers the whole request, body included.
	ReadTimeout    Duration `yaml:"read_timeout"`
	IdleTimeout    Duration `yaml:"idle_timeout"`
	MaxHeaderBytes Size     `yaml:"max_header_bytes"`
	// WriteTimeout is NGINX's send_timeout: the longest time between two
	// writes to a client that made progress; past it the connection is
	// closed and the upstream request it relays cancelled. 0: none.
	WriteTimeout Duration `yaml:"write_timeout"`
	// Via is the pseudonym added to Via on forwarded requests
	// (RFC 9110 §7.6.3); a request that arrives carrying it is a loop and
	// is answered 508. "" turns both off.
	Via string `yaml:"via"`
	// AllowTrace forwards TRACE; off (the default), TRACE is answered 405.
	AllowTrace bool `yaml:"allow_trace"`
	// MaxConnections bounds the proxy listener's client connections open
	// at once (NGINX's worker_connections, HAProxy's maxconn): past it an
	// idle keep-alive connection is closed for a new one, or, none idle,
	// new connections wait in the kernel's accept backlog. The admin
	// listener is not bounded by it, so it stays reachable at the cap.
	MaxConnections int `yaml:"max_connections"`
	// MaxPendingSendBytes bounds, for the whole process, the bytes held
	// by the proxy listener's writes that wait on a full socket (a
	// client that does not read its answer holds the cached body until
	// write_timeout): past it the writes held longest without progress
	// are cut (internal/sendbudget). A body written to several clients
	// at once counts once. The admin listener is not bounded by it.
	MaxPendingSendBytes Size `yaml:"max_pending_send_bytes"`
	// MaxPendingHeaderBytes bounds, for the whole process and both
	// listeners, the bytes of request header sections still being read
	// (a client that sends a large header slowly, or stalls in it, holds
	// what net/http read of it until read_header_timeout): past it the
	// connections holding the most are answered 431 and closed
	// (internal/headerbudget). A section that arrives whole is never
	// counted.
	MaxPendingHeaderBytes Size `yaml:"max_pending_header_bytes"`
}

type Admin struct {
	Listen string `yaml:"listen"`
	Token  string `yaml:"token"`
	// PProf serves /debug/pprof/ behind the admin token; off by default,
	// since profiles expose memory contents and cost CPU.
	PProf bool `yaml:"pprof"`
}

// Log chooses the process log's shape and whether each request is logged.
type Log struct {
	Format string `yaml:"format"` // text | json
	Level  string `yaml:"level"`  // debug | info | warn | error
	Access bool   `yaml:"access"`
	// RedactQuery names query parameters whose values the access log
	// replaces with REDACTED (exact names, case-insensitive).
	RedactQuery []string `yaml:"redact_query"`
}

// Coherence bounds how long any replica may serve a version older than an
// acknowledged write, whatever Redis does.
type Coherence struct {
	MaxLag Duration `yaml:"max_lag"`
	// WriteHold bounds how long a write's answer waits for its
	// invalidation to be published when Redis did not take it at once
	// (default max_lag; 0: never wait). The promise's clock starts at the
	// answer, so an answer held until the publish keeps it; one answered
	// past the hold is counted in sidecache_invalidations_late_total.
	// The default is max_lag on purpose: replicas that have heard nothing
	// for max_lag serve only entries fetched within it, so in an outage
	// of the whole Redis a write held that long is answered when no
	// replica may serve a copy from before it. Both need a restart, so a
	// reload never parts them (lease_ttl's source, upstream.timeout,
	// reloads in place, hence its own rule in internal/server).
	WriteHold Duration `yaml:"write_hold"`
}

type Upstream struct {
	URL     string   `yaml:"url"`
	Timeout Duration `yaml:"timeout"`
	// MaxIdleConnsPerHost sizes the keep-alive pool to the upstream.
	MaxIdleConnsPerHost int `yaml:"max_idle_conns_per_host"`
	// MaxHeaderBytes bounds the bytes of one answer's header sections,
	// its 1xx answers' included (http.Transport's MaxResponseHeaderBytes).
	MaxHeaderBytes Size `yaml:"max_header_bytes"`
	// AllowUpgrades are the Upgrade protocols (RFC 9110 §7.8) a client
	// may tunnel to the upstream, e.g. [websocket]; none by default. h2c
	// is never allowed (RFC 9113 §3.1).
	AllowUpgrades []string `yaml:"allow_upgrades"`
	// TunnelIdleTimeout is how long an upgraded connection may carry no
	// byte either way before both its sides are closed (HAProxy's
	// timeout tunnel; NGINX bounds a WebSocket by proxy_read_timeout).
	// Kept apart from Timeout, which is sized for an API call: a healthy
	// WebSocket is often quiet for a minute between its pings.
	TunnelIdleTimeout Duration `yaml:"tunnel_idle_timeout"`
	// MaxTunnels bounds the upgraded connections open at once: each
	// holds two connections and two goroutines for as long as its bytes
	// move, so a client opening busy tunnels could hold any number.
	MaxTunnels int `yaml:"max_tunnels"`
}

type Cache struct {
	MaxBodyBytes Size `yaml:"max_body_bytes"`
	// MaxKeyBytes: a request whose cache key would be longer passes
	// through uncached, so hostile keys cannot inflate memory.
	MaxKeyBytes Size `yaml:"max_key_bytes"`
	L1          L1   `yaml:"l1"`
	L2          *L2  `yaml:"l2"` // nil: L1-only
	// TagHeaders name the upstream response headers whose values are
	// surrogate keys added to the stored entry's tags (default
	// [Surrogate-Key, xkey]; [] turns this off).
	TagHeaders []string `yaml:"tag_headers"`
	// StripTagHeaders removes those headers before a client sees them
	// (default true).
	StripTagHeaders *bool `yaml:"strip_tag_headers"`
}

type L1 struct {
	MaxBytes Size `yaml:"max_bytes"`
}

type L2 struct {
	Redis Redis `yaml:"redis"`
	// Lease makes coalescing cluster-wide: one replica fetches a cold key,
	// the others wait for its L2 write. Default on; LeaseTTL bounds the wait.
	Lease    *bool    `yaml:"lease"`
	LeaseTTL Duration `yaml:"lease_ttl"`
}

type Redis struct {
	Addrs      []string `yaml:"addrs"`
	MasterName string   `yaml:"master_name"`
	Cluster    bool     `yaml:"cluster"`
	Username   string   `yaml:"username"`
	Password   string   `yaml:"password"`
	DB         int      `yaml:"db"`
	Prefix     string   `yaml:"prefix"`
	Timeout    Duration `yaml:"timeout"`
	// ShardedPubSub (Redis Cluster only) moves invalidations and
	// heartbeats to sharded pub/sub in one slot, where the heartbeat's
	// ordering proof holds (docs/coherence.md). Replicas of a release
	// without it do not hear sharded messages: turn it on once every
	// replica runs a release that has it.
	ShardedPubSub bool `yaml:"sharded_pubsub"`
	// SubscribeAddrs are read replicas of the master (host:port) that
	// carry the replicas' subscriptions, the relay tier: every PUBLISH
	// stays on the master, which reaches them through replication, and
	// each delivers to its share of the fleet (docs/coherence.md). Not
	// with Redis Cluster.
	SubscribeAddrs []string `yaml:"subscribe_addrs"`
}

type Route struct {
	Name                 string   `yaml:"name"`
	Methods              []string `yaml:"methods"`
	Path                 string   `yaml:"path"`
	TTL                  Duration `yaml:"ttl"`
	StaleWhileRevalidate Duration `yaml:"stale_while_revalidate"`
	StaleIfError         Duration `yaml:"stale_if_error"`
	NegativeTTL          Duration `yaml:"negative_ttl"`
	// Freshness is "route" (ttl governs) or "origin" (RFC 9111 freshness
	// from the response; ttl is then the heuristic).
	Freshness string   `yaml:"freshness"`
	MaxTTL    Duration `yaml:"max_ttl"`
	// TargetedFields are the RFC 9213 targeted cache-control fields obeyed
	// in origin mode, first present wins; nil: CDN-Cache-Control,
	// Surrogate-Control; empty: Cache-Control only.
	TargetedFields []string `yaml:"targeted_fields"`
	// ForwardHeaders is "keyed" (only headers the key or Vary sees, tracing
	// and the sidecar's own X-Forwarded-*) or "all".
	ForwardHeaders string `yaml:"forward_headers"`
	// RequestNoCache is what a client's Cache-Control: no-cache or
	// max-age=0 (or Pragma: no-cache) does: "refresh" (fetch anew; the
	// default with freshness: origin, RFC 9111 §5.2.1) or "ignore" (the
	// default with freshness: route, as NGINX and Varnish do).
	RequestNoCache string   `yaml:"request_no_cache"`
	Key            Key      `yaml:"key"`
	Tags           []string `yaml:"tags"`
	Invalidate     []string `yaml:"invalidate"`
	Batch          *Batch   `yaml:"batch"`
	Split          *Split   `yaml:"split"`
}

type Key struct {
	// Query lists the query parameters in the key; nil means all, sorted;
	// an empty list means none.
	Query   []string `yaml:"query"`
	Headers []string `yaml:"headers"`
	// Host is "request" (the request's Host is in the key; the default),
	// "none" (no host in the key), or the one canonical host name every
	// request of the route is keyed under.
	Host string `yaml:"host"`
}

type Batch struct {
	Path    string   `yaml:"path"`
	Param   string   `yaml:"param"`
	MaxSize int      `yaml:"max_size"`
	MaxWait Duration `yaml:"max_wait"`
	IDField string   `yaml:"id_field"`
	// ETagField names the field of each element that holds the app's
	// validator for it; empty: the sidecar makes one over the bytes.
	ETagField string `yaml:"etag_field"`
	// MaxInFlight bounds the bulk calls of one group at once; while they
	// run, new IDs accumulate for the next call.
	MaxInFlight int `yaml:"max_in_flight"`
	// MaxRouteInFlight bounds the bulk calls of all the route's groups
	// at once: groups follow what clients send (the Host, keyed
	// headers), so max_in_flight alone let one client varying its Host
	// have the bulk endpoint carry max_in_flight calls per Host spelling.
	MaxRouteInFlight int `yaml:"max_route_in_flight"`
}

type Split struct {
	Param string `yaml:"param"`
	Route string `yaml:"route"`
	// MaxIDs bounds the distinct ids of one list request; more is a 400.
	MaxIDs int `yaml:"max_ids"`
}

// Duration is a time.Duration written in Go syntax ("250ms", "5m").
type Duration time.Duration

// Size is a byte count written as a plain integer or with B, KiB, MiB, GiB
// or TiB (1024-based, any letter case). KB, MB and GB are refused as
// ambiguous; see parseSize.
type Size int64
