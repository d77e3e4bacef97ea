package config

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/sidecache/sidecache/internal/httpcache"
)

// Validate checks a Config whose defaults are filled (Parse has done both)
// and returns an Errors naming the field path of every problem, or nil.
func (c *Config) Validate() error { return c.validate().err() }

type checker struct{ errs Errors }

func (v *checker) add(path, format string, args ...any) {
	v.errs = append(v.errs, &Error{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (v *checker) positive(path string, d Duration) {
	if d <= 0 {
		v.add(path, "must be > 0")
	}
}

func (v *checker) nonNegative(path string, d Duration) {
	if d < 0 {
		v.add(path, "must not be negative")
	}
}

func (c *Config) validate() Errors {
	v := &checker{}
	v.hostPort("listen", c.Listen, false)
	v.hostPort("admin.listen", c.Admin.Listen, false)
	if strings.ContainsFunc(c.Admin.Token, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
		// RFC 9110 §5.5: a field value carries no CTL but HTAB.
		v.add("admin.token", "must not contain control characters: no Authorization header can carry them")
	}
	v.positive("server.read_header_timeout", c.Server.ReadHeaderTimeout)
	v.positive("server.read_timeout", c.Server.ReadTimeout)
	v.positive("server.idle_timeout", c.Server.IdleTimeout)
	if c.Server.MaxHeaderBytes <= 0 {
		v.add("server.max_header_bytes", "must be > 0")
	}
	v.nonNegative("server.write_timeout", c.Server.WriteTimeout)
	// 0 is refused rather than read as "unbounded", as max_tunnels: the
	// bound is what keeps idle and stalled clients from growing memory.
	if c.Server.MaxConnections <= 0 {
		v.add("server.max_connections", "must be > 0")
	}
	if c.Server.MaxPendingSendBytes <= 0 {
		v.add("server.max_pending_send_bytes", "must be > 0")
	}
	if c.Server.MaxPendingHeaderBytes <= 0 {
		v.add("server.max_pending_header_bytes", "must be > 0")
	}
	if c.Server.Via != "" && !isToken(c.Server.Via) {
		v.add("server.via", "must be a token (letters, digits, !#$%%&'*+-.^_`|~), got %q", c.Server.Via)
	}
	v.oneOf("log.format", c.Log.Format, "text", "json")
	v.oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")
	for i, name := range c.Log.RedactQuery {
		if strings.TrimSpace(name) == "" {
			v.add(fmt.Sprintf("log.redact_query[%d]", i), "must not be empty")
		}
	}
	v.positive("coherence.max_lag", c.Coherence.MaxLag)
	v.nonNegative("coherence.write_hold", c.Coherence.WriteHold)
	v.upstreamURL("upstream.url", c.Upstream.URL)
	v.positive("upstream.timeout", c.Upstream.Timeout)
	if c.Upstream.MaxIdleConnsPerHost <= 0 {
		v.add("upstream.max_idle_conns_per_host", "must be > 0")
	}
	if c.Upstream.MaxHeaderBytes <= 0 {
		v.add("upstream.max_header_bytes", "must be > 0")
	}
	for i, p := range c.Upstream.AllowUpgrades {
		path := fmt.Sprintf("upstream.allow_upgrades[%d]", i)
		switch name, _, _ := strings.Cut(p, "/"); {
		case !isToken(name):
			v.add(path, "must be an Upgrade protocol token, got %q", p)
		case strings.EqualFold(name, "h2c"):
			v.add(path, "h2c is never forwarded (RFC 9113 §3.1 deprecates it)")
		}
	}
	// 0 is refused rather than read as "forever": a tunnel nobody uses
	// must not hold two connections and two goroutines for good.
	v.positive("upstream.tunnel_idle_timeout", c.Upstream.TunnelIdleTimeout)
	if c.Upstream.MaxTunnels <= 0 {
		v.add("upstream.max_tunnels", "must be > 0")
	}
	v.loop(c)
	if c.Cache.MaxBodyBytes <= 0 {
		v.add("cache.max_body_bytes", "must be > 0")
	}
	if c.Cache.MaxKeyBytes <= 0 {
		v.add("cache.max_key_bytes", "must be > 0")
	}
	if c.Cache.L1.MaxBytes < 0 {
		v.add("cache.l1.max_bytes", "must not be negative (0 disables L1)")
	}
	v.tagHeaders("cache.tag_headers", c.Cache.TagHeaders)
	if l2 := c.Cache.L2; l2 != nil {
		v.redis("cache.l2.redis", &l2.Redis)
		if l2.Lease == nil || *l2.Lease {
			v.positive("cache.l2.lease_ttl", l2.LeaseTTL)
		} else {
			v.nonNegative("cache.l2.lease_ttl", l2.LeaseTTL)
		}
	}
	v.routes(c.Routes)
	v.positive("shutdown_timeout", c.ShutdownTimeout)
	v.nonNegative("shutdown_delay", c.ShutdownDelay)
	return v.errs
}

// hostPort accepts what net.Listen and net.Dial take; a listener may omit
// the host (all interfaces) and use port 0 (any free port, handy in tests).
func (v *checker) hostPort(path, s string, dial bool) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		v.add(path, "invalid address %q: want host:port", s)
		return
	}
	n, err := strconv.Atoi(port)
	switch {
	case err != nil || n < 0 || n > 65535 || (dial && n == 0):
		v.add(path, "invalid port in %q", s)
	case dial && host == "":
		v.add(path, "missing host in %q", s)
	}
}

// loop refuses an upstream that is one of the sidecar's own listeners:
// every request would come back to it, each opening another connection,
// until file descriptors ran out.
func (v *checker) loop(c *Config) {
	u, err := url.Parse(c.Upstream.URL)
	if err != nil || u.Host == "" {
		return // upstream.url's own error
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	for _, l := range []struct{ path, addr string }{{"listen", c.Listen}, {"admin.listen", c.Admin.Listen}} {
		if SameAddress(l.addr, u.Hostname(), port) {
			v.add("upstream.url", "%s is the sidecar's own %s (%s): every request would loop", c.Upstream.URL, l.path, l.addr)
		}
	}
}

// SameAddress reports whether a listen address (host:port) would accept a
// connection to host:port: the same port, and the same host, or a listen
// host that is every interface, or both on loopback. A port of 0 (chosen
// at start) matches nothing; server checks the bound address again.
func SameAddress(listen, host, port string) bool {
	lh, lp, err := net.SplitHostPort(listen)
	if err != nil || lp != port || lp == "0" {
		return false
	}
	if lh == "" || lh == "0.0.0.0" || lh == "::" || strings.EqualFold(lh, host) {
		return true
	}
	return loopback(lh) && loopback(host)
}

func loopback(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func (v *checker) oneOf(path, got string, want ...string) {
	if !slices.Contains(want, got) {
		named := slices.DeleteFunc(slices.Clone(want), func(s string) bool { return s == "" })
		v.add(path, "must be one of %s, got %q", strings.Join(named, ", "), got)
	}
}

func (v *checker) upstreamURL(path, s string) {
	u, err := url.Parse(s)
	switch {
	case s == "":
		v.add(path, "required")
	case err != nil:
		v.add(path, "invalid URL %q", s)
	case u.Scheme != "http" && u.Scheme != "https":
		v.add(path, "want an absolute http or https URL, got %q", s)
	case u.Host == "":
		v.add(path, "missing host in %q", s)
	}
}

func (v *checker) redis(path string, r *Redis) {
	if len(r.Addrs) == 0 {
		v.add(path+".addrs", "must list at least one host:port")
	}
	for i, a := range r.Addrs {
		v.hostPort(fmt.Sprintf("%s.addrs[%d]", path, i), a, true)
	}
	if r.MasterName != "" && r.Cluster {
		v.add(path+".cluster", "cannot be combined with master_name (Sentinel)")
	}
	if r.DB < 0 || (r.DB != 0 && r.Cluster) {
		v.add(path+".db", "must be >= 0, and 0 for Redis Cluster")
	}
	v.positive(path+".timeout", r.Timeout)
	if r.ShardedPubSub && !(r.Cluster || len(r.Addrs) > 1 && r.MasterName == "") {
		v.add(path+".sharded_pubsub", "needs Redis Cluster (cluster: true)")
	}
	for i, a := range r.SubscribeAddrs {
		v.hostPort(fmt.Sprintf("%s.subscribe_addrs[%d]", path, i), a, true)
	}
	switch {
	case len(r.SubscribeAddrs) == 0:
	case r.Cluster || len(r.Addrs) > 1 && r.MasterName == "":
		// A Cluster sends PUBLISH to other nodes, replicas included, over
		// the cluster bus, not the replication stream: no backlog, no order
		// with what other nodes publish, so the proof would not hold.
		v.add(path+".subscribe_addrs", "not with Redis Cluster: there PUBLISH reaches replicas over the cluster bus, without the replication stream's order the heartbeat proof needs")
	case r.ShardedPubSub:
		v.add(path+".subscribe_addrs", "cannot be combined with sharded_pubsub (Cluster only)")
	}
}

func (v *checker) routes(rs []Route) {
	byName := map[string]int{}
	for i := range rs {
		r := &rs[i]
		p := "routes[" + strconv.Itoa(i) + "]"
		switch first, dup := byName[r.Name]; {
		case r.Name == "":
			v.add(p+".name", "required")
		case r.Name == "_pass":
			v.add(p+".name", `"_pass" is reserved for unmatched requests`)
		case dup:
			v.add(p+".name", "duplicate route name %q (also routes[%d].name)", r.Name, first)
		default:
			byName[r.Name] = i
		}
		v.route(p, r)
	}
	for i := range rs {
		s := rs[i].Split
		if s == nil {
			continue
		}
		p := fmt.Sprintf("routes[%d].split.route", i)
		target, ok := byName[s.Route]
		switch {
		case s.Route == "":
			v.add(p, "required")
		case s.Route == rs[i].Name:
			v.add(p, "must name another route")
		case !ok:
			v.add(p, "unknown route %q", s.Route)
		case rs[target].Batch == nil:
			v.add(p, "route %q has no batch", s.Route)
		}
	}
}

func (v *checker) route(p string, r *Route) {
	if len(r.Methods) == 0 {
		v.add(p+".methods", "must list at least one method")
	}
	known := httpcache.KnownMethods() // a typo ("GTE") would silently match nothing
	for j, m := range r.Methods {
		if !slices.Contains(known, m) {
			v.add(fmt.Sprintf("%s.methods[%d]", p, j), "unknown method %q (want one of %s)", m, strings.Join(known, ", "))
		}
	}
	get := slices.Contains(r.Methods, http.MethodGet)
	params, pathOK := v.pattern(p+".path", r.Path)

	// "" is the default (route, keyed) for a Config built in code.
	v.oneOf(p+".freshness", r.Freshness, "", "route", "origin")
	v.oneOf(p+".forward_headers", r.ForwardHeaders, "", "keyed", "all")
	v.oneOf(p+".request_no_cache", r.RequestNoCache, "", "ignore", "refresh")
	v.nonNegative(p+".max_ttl", r.MaxTTL)
	if r.MaxTTL > 0 && r.Freshness != "origin" {
		v.add(p+".max_ttl", "only applies with freshness: origin")
	}
	if r.TargetedFields != nil && r.Freshness != "origin" {
		v.add(p+".targeted_fields", "only applies with freshness: origin")
	}
	for j, f := range r.TargetedFields {
		if !validFieldName(f) {
			v.add(fmt.Sprintf("%s.targeted_fields[%d]", p, j), "%q is not a header field name", f)
		}
	}
	// In origin mode the response says how long it stays fresh; ttl is
	// only the heuristic for responses that say nothing.
	if (get || slices.Contains(r.Methods, http.MethodHead)) && r.Split == nil && r.Freshness != "origin" {
		v.positive(p+".ttl", r.TTL)
	} else {
		v.nonNegative(p+".ttl", r.TTL)
	}
	v.nonNegative(p+".stale_while_revalidate", r.StaleWhileRevalidate)
	v.nonNegative(p+".stale_if_error", r.StaleIfError)
	v.nonNegative(p+".negative_ttl", r.NegativeTTL)
	switch h := r.Key.Host; h {
	case "request", "none":
	default:
		if u, err := url.Parse("http://" + h + "/"); err != nil || u.Host != h || strings.ContainsAny(h, "@/?#") {
			v.add(p+".key.host", "%q is neither request, none nor a host[:port]", h)
		}
	}
	for j, h := range r.Key.Headers {
		if !isToken(h) {
			v.add(fmt.Sprintf("%s.key.headers[%d]", p, j), "invalid header name %q", h)
		}
	}
	if pathOK {
		v.templates(p+".tags", r.Tags, r.Path, params)
		v.templates(p+".invalidate", r.Invalidate, r.Path, params)
	}

	if b := r.Batch; b != nil {
		bp := p + ".batch"
		if r.Split != nil {
			v.add(p, "batch and split cannot both be set")
		}
		if !strings.HasPrefix(b.Path, "/") {
			v.add(bp+".path", "must start with \"/\"")
		}
		if b.Param == "" {
			v.add(bp+".param", "required")
		}
		if b.IDField == "" {
			v.add(bp+".id_field", "required")
		}
		if b.ETagField != "" && b.ETagField == b.IDField {
			v.add(bp+".etag_field", "must differ from id_field (an ID is not a version)")
		}
		if b.MaxSize <= 0 {
			v.add(bp+".max_size", "must be > 0")
		}
		v.positive(bp+".max_wait", b.MaxWait)
		if b.MaxInFlight <= 0 {
			v.add(bp+".max_in_flight", "must be > 0")
		}
		if b.MaxRouteInFlight <= 0 {
			v.add(bp+".max_route_in_flight", "must be > 0")
		}
		if !get {
			v.add(p+".methods", "must include GET for batch")
		}
		if pathOK && (len(params) != 1 || params[0] == "*") {
			v.add(p+".path", "batch needs exactly one {param} in the path (the ID), found %d", len(params))
		}
	}
	if s := r.Split; s != nil {
		if s.Param == "" {
			v.add(p+".split.param", "required")
		}
		if s.MaxIDs <= 0 {
			v.add(p+".split.max_ids", "must be > 0")
		}
		if !get {
			v.add(p+".methods", "must include GET for split")
		}
	}
}

// pattern checks a route path by registering it on a chi router, the same
// parser the route table uses, and returns its param names.
func (v *checker) pattern(path, pat string) ([]string, bool) {
	if pat == "" {
		v.add(path, "required")
		return nil, false
	}
	if pat[0] != '/' {
		v.add(path, "must start with \"/\"")
		return nil, false
	}
	if msg := chiRejects(pat); msg != "" {
		v.add(path, "invalid pattern %q: %s", pat, msg)
		return nil, false
	}
	params, err := pathParams(pat)
	if err != nil {
		v.add(path, "invalid pattern %q: %v", pat, err)
		return nil, false
	}
	return params, true
}

func chiRejects(pat string) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = strings.TrimPrefix(fmt.Sprint(r), "chi: ")
		}
	}()
	chi.NewRouter().Get(pat, http.NotFound)
	return ""
}

// pathParams lists a chi pattern's params in order: {name} and
// {name:regexp} give name (a regexp may hold braces), a trailing * gives
// "*". chi rejects most duplicates itself; this also catches {} and any
// duplicate a future chi lets through, since URL params are looked up by
// name.
func pathParams(pat string) ([]string, error) {
	params, err := scanParams(pat)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(params))
	for _, p := range params {
		if p.name == "" {
			return nil, fmt.Errorf("empty param name")
		}
		if slices.Contains(names, p.name) {
			return nil, fmt.Errorf("duplicate param {%s}", p.name)
		}
		names = append(names, p.name)
	}
	return names, nil
}

// patternParam is one param of a chi pattern; open means it matches any
// segment ({name} without a regexp, or the trailing *).
type patternParam struct {
	name string
	open bool
}

// scanParams is the one reader of a pattern's params, for validation and
// for warnings alike. On an unclosed "{" it returns the params before it
// with the error.
func scanParams(pat string) ([]patternParam, error) {
	var params []patternParam
	for i := 0; i < len(pat); i++ {
		switch pat[i] {
		case '*':
			params = append(params, patternParam{name: "*", open: true})
		case '{':
			depth, end := 0, -1
			for j := i; j < len(pat) && end < 0; j++ {
				switch pat[j] {
				case '{':
					depth++
				case '}':
					if depth--; depth == 0 {
						end = j
					}
				}
			}
			if end < 0 {
				return params, fmt.Errorf("unclosed \"{\"")
			}
			name, _, constrained := strings.Cut(pat[i+1:end], ":")
			params = append(params, patternParam{name: name, open: !constrained})
			i = end
		}
	}
	return params, nil
}

// templates checks that each tag template only names params of the path,
// since those are the only values known when the template is filled.
func (v *checker) templates(path string, ts []string, pat string, params []string) {
	for j, t := range ts {
		p := fmt.Sprintf("%s[%d]", path, j)
		if t == "" {
			v.add(p, "must not be empty")
		}
		for rest := t; ; {
			open := strings.IndexByte(rest, '{')
			if open < 0 {
				break
			}
			end := strings.IndexByte(rest[open:], '}')
			if end < 0 {
				v.add(p, "unclosed \"{\" in %q", t)
				break
			}
			if name := rest[open+1 : open+end]; !slices.Contains(params, name) {
				v.add(p, "{%s} is not a param of path %q", name, pat)
			}
			rest = rest[open+end+1:]
		}
	}
}

// tagHeaders checks cache.tag_headers: header names, each once.
func (v *checker) tagHeaders(path string, names []string) {
	for i, n := range names {
		switch {
		case !isToken(n):
			v.add(fmt.Sprintf("%s[%d]", path, i), "invalid header name %q", n)
		case slices.IndexFunc(names[:i], func(m string) bool { return strings.EqualFold(m, n) }) >= 0:
			v.add(fmt.Sprintf("%s[%d]", path, i), "%q listed twice", n)
		}
	}
}

// isToken reports whether s is an RFC 9110 §5.6.2 token, the syntax of
// both method names (§9.1) and header field names (§5.1).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// validFieldName reports whether s is an HTTP field name (RFC 9110 §5.1: a
// token).
func validFieldName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
