package edge

import (
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Options are the request rules' settings.
type Options struct {
	// Via is the pseudonym the sidecar adds to Via (RFC 9110 §7.6.3) on
	// the requests it forwards; a request that already carries it came
	// back round a loop and is answered 508. "" adds none and checks none.
	Via string
	// AllowTrace forwards TRACE, which reflects the request — its
	// credentials included — back to whoever can make a client send it;
	// off, TRACE is answered 405 (as NGINX does).
	AllowTrace bool
	// Upgrades are the protocols (Upgrade tokens, RFC 9110 §7.8, compared
	// without case) a client may ask the upstream to switch to; any other
	// Upgrade is removed from the request, which then goes on as an
	// ordinary one. h2c is never forwarded (RFC 9113 §3.1).
	Upgrades []string
	// Count is told each request the Guard refuses (nil: none).
	Count Counter
	// Keyed reports whether a canonical field name is one a route's key
	// holds (key.headers), read per request so a reload is seen; nil:
	// none. Its underscore spellings are dropped with the sidecar's own
	// (Reserved).
	Keyed func(name string) bool
}

// Counter counts what the edge refuses, once per refused request or cut
// connection, by reason (the Reason constants): a client or a front proxy
// that misbehaves shows in the metrics, not only in its own logs.
// *metrics.Metrics is one (sidecache_edge_refused_total).
type Counter interface{ EdgeRefused(reason string) }

// Reasons, the reason label of sidecache_edge_refused_total.
const (
	ReasonFraming      = "framing"       // 400: ambiguous framing (RFC 9112 §6.1)
	ReasonLoop         = "loop"          // 508: our own Via pseudonym came back (RFC 9110 §7.6.3)
	ReasonTrace        = "trace"         // 405: TRACE while it is not allowed
	ReasonAsteriskForm = "asterisk-form" // 400: "*" as the target of a method other than OPTIONS (RFC 9112 §3.2.4)
	ReasonReadTimeout  = "read-timeout"  // 408: the request body was still arriving at the read deadline (bodytimeout.go)
	ReasonWriteTimeout = "write-timeout" // a connection cut: the client stopped reading (Listener)
	// ReasonSendBudget: a connection cut because the writes waiting on
	// full sockets held more than server.max_pending_send_bytes, and its
	// write had gone longest without progress (sendbudget.go).
	ReasonSendBudget = "send-budget"
	// ReasonHeaderBudget: a connection answered 431 and closed because
	// the header sections still being read held more than
	// server.max_pending_header_bytes, and its section was the largest
	// (headerbudget.go).
	ReasonHeaderBudget = "header-budget"
	// An upgraded connection (a tunnel) cut after
	// upstream.tunnel_idle_timeout without a byte either way; the proxy
	// counts it, since the tunnel is its.
	ReasonTunnelIdle = "tunnel-idle"
	// An upgrade request refused 503 unsent: upstream.max_tunnels
	// tunnels were open; the proxy counts it, since the tunnels are its.
	ReasonTunnelLimit = "tunnel-limit"
	// net/http's own answers, before any handler (Wire): 431 for a header
	// block over MaxHeaderBytes, any other (400, 417, 501, 505) malformed.
	ReasonHeaderTooLarge = "header-too-large"
	ReasonMalformed      = "malformed"
)

// Reasons are the reasons a Guard with o, behind a Listener with
// writeTimeout, can count: the series worth creating at zero. The
// server's read_timeout is always set, so ReasonReadTimeout always can,
// and so is its proxy listener's send budget (ReasonSendBudget);
// ReasonTunnelIdle and ReasonTunnelLimit (counted by the proxy) only
// where upgrades are allowed.
func Reasons(o Options, writeTimeout time.Duration) []string {
	r := []string{ReasonFraming, ReasonAsteriskForm, ReasonReadTimeout, ReasonMalformed, ReasonHeaderTooLarge, ReasonSendBudget, ReasonHeaderBudget}
	if o.Via != "" {
		r = append(r, ReasonLoop)
	}
	if !o.AllowTrace {
		r = append(r, ReasonTrace)
	}
	if writeTimeout > 0 {
		r = append(r, ReasonWriteTimeout)
	}
	if len(o.Upgrades) > 0 {
		r = append(r, ReasonTunnelIdle, ReasonTunnelLimit)
	}
	return r
}

// allowed is the Allow of the sidecar's own answers to OPTIONS and TRACE.
const allowed = "GET, HEAD, OPTIONS, POST, PUT, PATCH, DELETE"

// Guard applies the request rules of the package doc, then hands the
// request to next.
type Guard struct {
	next http.Handler
	o    Options
	via  []string // "1.1 <pseudonym>", the field value on its own
}

// NewGuard returns a Guard in front of next.
func NewGuard(next http.Handler, o Options) *Guard {
	g := &Guard{next: next, o: o}
	if o.Via != "" {
		g.via = []string{"1.1 " + o.Via}
	}
	return g
}

func (g *Guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.ambiguous(r) {
		// RFC 9112 §6.1: a request with both Content-Length and
		// Transfer-Encoding, or Transfer-Encoding in HTTP/1.0, has
		// framing a front proxy may read otherwise than we did; NGINX
		// answers 400 and closes, and so do we (see README).
		g.refuse(w, ReasonFraming, http.StatusBadRequest, "ambiguous message framing\n")
		return
	}
	if c := FromContext(r.Context()); c != nil {
		switch {
		case c.Folded():
			// RFC 9112 §5.2: obs-fold in a request is rejected with 400
			// (or replaced with SP); a front proxy may have read the
			// folded line as a field of its own, Transfer-Encoding say,
			// and framed the request otherwise than net/http did
			// (fold.go). NGINX answers 400, and so do we, closing.
			g.refuse(w, ReasonFraming, http.StatusBadRequest, "obsolete line folding\n")
			return
		case c.Unscanned():
			// The fold scan lost the connection's framing at an earlier
			// request, which net/http should have refused (fold.go):
			// this one was not looked at for a fold, so it goes no
			// further than a folded one.
			g.refuse(w, ReasonFraming, http.StatusBadRequest, "request framing not followed\n")
			return
		case c.LastScanned():
			// The scan lost the framing at this request: the next one
			// would be Unscanned, so none comes on this connection.
			w.Header().Set("Connection", "close")
		}
	}
	if r.RequestURI == "*" {
		if r.Method != http.MethodOptions {
			// RFC 9112 §3.2.4: the asterisk-form is for OPTIONS only.
			// net/http hands any method with it to the handler, an
			// HTTP/2 preface (PRI * HTTP/2.0) included, and forwarding
			// it would send the upstream a path the client never wrote
			// ("/%2A"). NGINX answers 400, and so do we.
			g.refuse(w, ReasonAsteriskForm, http.StatusBadRequest, "asterisk-form request target is for OPTIONS only\n")
			return
		}
		// OPTIONS * asks about the server itself (RFC 9110 §9.3.7): it
		// is answered here, as net/http's general OPTIONS handler
		// answered it before Wire turned that off.
		w.Header().Set("Allow", allowed)
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
		return
	}
	if g.o.Via != "" && viaHas(r.Header["Via"], g.o.Via) {
		// RFC 9110 §7.6.3: our own pseudonym on the way in is a loop
		// (the upstream, or something behind it, is the sidecar).
		g.refuse(w, ReasonLoop, http.StatusLoopDetected, "loop detected\n")
		return
	}
	if !g.o.AllowTrace && strings.EqualFold(r.Method, http.MethodTrace) {
		// Any case: method names are case-sensitive (RFC 9110 §9.1),
		// so "trace" is not TRACE, but a stack behind may fold it and
		// reflect the request, credentials included.
		w.Header().Set("Allow", allowed)
		g.refuse(w, ReasonTrace, http.StatusMethodNotAllowed, "TRACE not allowed\n")
		return
	}
	if (r.Method == http.MethodTrace || r.Method == http.MethodOptions) && g.maxForwards(w, r) {
		return
	}
	dropUnderscored(r.Header, g.o.Keyed)
	if _, ok := r.Header["Upgrade"]; ok {
		g.upgrade(r)
	}
	if conn, ok := r.Header["Connection"]; ok {
		dropConnectionNamed(r.Header, conn)
	}
	if g.via != nil {
		if v, ok := r.Header["Via"]; ok {
			r.Header["Via"] = append(v[:len(v):len(v)], g.via[0])
		} else {
			r.Header["Via"] = g.via[:1:1] // shared, read-only: appending copies
		}
	}
	g.next.ServeHTTP(w, r)
}

// ambiguous reports a request whose framing RFC 9112 §6.1 says to treat as
// faulty: Transfer-Encoding on HTTP/1.0, or with a Content-Length. net/http
// deletes the field the handler would need to tell (Transfer-Encoding on
// HTTP/1.0, Content-Length beside Transfer-Encoding), so the connection's
// scan of its header sections tells instead.
func (g *Guard) ambiguous(r *http.Request) bool {
	if r.ProtoAtLeast(1, 1) && len(r.TransferEncoding) == 0 {
		return false // the common case: nothing to look up
	}
	c := FromContext(r.Context())
	if c == nil {
		return false
	}
	if !r.ProtoAtLeast(1, 1) {
		return c.SawTransferEncoding()
	}
	return c.AmbiguousFraming()
}

// refuse answers code with a short text and closes the connection after;
// it counts the refusal under reason.
func (g *Guard) refuse(w http.ResponseWriter, reason string, code int, text string) {
	if g.o.Count != nil {
		g.o.Count.EdgeRefused(reason)
	}
	h := w.Header()
	h.Set("Connection", "close")
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(text))
}

// maxForwards applies Max-Forwards to a TRACE or OPTIONS (RFC 9110
// §7.6.2): at 0 the sidecar is the final recipient and answers itself
// (true); above it, the value forwarded is one less.
func (g *Guard) maxForwards(w http.ResponseWriter, r *http.Request) bool {
	v, ok := r.Header["Max-Forwards"]
	if !ok || len(v) == 0 {
		return false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(v[0]), 10, 31)
	if err != nil {
		return false // not a count: forwarded as it came, as NGINX does
	}
	if n > 0 {
		r.Header["Max-Forwards"] = []string{strconv.FormatUint(n-1, 10)}
		return false
	}
	if r.Method == http.MethodOptions {
		w.Header().Set("Allow", allowed)
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
		return true
	}
	// TRACE (allowed): the request as received, without the fields that
	// carry credentials (RFC 9110 §9.3.8 SHOULD).
	h := r.Header.Clone()
	for _, k := range []string{"Authorization", "Proxy-Authorization", "Cookie"} {
		h.Del(k)
	}
	w.Header().Set("Content-Type", "message/http")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(r.Method + " " + r.RequestURI + " " + r.Proto + "\r\nHost: " + r.Host + "\r\n"))
	_ = h.Write(w)
	_, _ = w.Write([]byte("\r\n"))
	return true
}

// upgrade removes from r an Upgrade the config does not allow, with its
// Connection token, so the request goes on as an ordinary one (a server
// may ignore Upgrade, RFC 9110 §7.8). h2c's HTTP2-Settings goes with it.
func (g *Guard) upgrade(r *http.Request) {
	var kept []string
	for _, f := range r.Header["Upgrade"] {
		for _, p := range strings.Split(f, ",") {
			p = strings.TrimSpace(p)
			name, _, _ := strings.Cut(p, "/")
			if p != "" && !strings.EqualFold(name, "h2c") && slices.ContainsFunc(g.o.Upgrades, func(a string) bool { return strings.EqualFold(a, name) }) {
				kept = append(kept, p)
			}
		}
	}
	r.Header.Del("HTTP2-Settings")
	if len(kept) > 0 {
		r.Header["Upgrade"] = []string{strings.Join(kept, ", ")}
		return
	}
	r.Header.Del("Upgrade")
	var conn []string
	for _, f := range r.Header["Connection"] {
		for _, t := range strings.Split(f, ",") {
			if t = strings.TrimSpace(t); t != "" && !strings.EqualFold(t, "upgrade") && !strings.EqualFold(t, "http2-settings") {
				conn = append(conn, t)
			}
		}
	}
	if len(conn) > 0 {
		r.Header["Connection"] = []string{strings.Join(conn, ", ")}
	} else {
		r.Header.Del("Connection")
	}
}

// dropConnectionNamed removes from h the fields its Connection names
// (RFC 9110 §7.6.1: they are for this hop only), on receipt, as Varnish
// does, rather than only from the copy forwarded upstream: the cache key,
// the batch group and the Vary a bulk answer is read against are built
// from the request, and a key that holds a field the upstream never
// received stores the answer made without it under the key of the value
// sent (a client naming a keyed header, X-Tenant, in Connection, stored
// the no-tenant answer as every tenant-t1 client's hit). Upgrade stays:
// upgrade() has already kept only one the config allows, which the
// pass-through relays with its Connection token.
func dropConnectionNamed(h http.Header, conn []string) {
	for _, f := range conn {
		for t := range strings.SplitSeq(f, ",") {
			if t = textproto.TrimString(t); t != "" && !strings.EqualFold(t, "upgrade") && !strings.EqualFold(t, "connection") {
				h.Del(t)
			}
		}
	}
}

// viaHas reports whether a Via field names pseudonym as a received-by
// (RFC 9110 §7.6.3: "1.1 name" or "name" after the protocol, with an
// optional comment).
func viaHas(vs []string, pseudonym string) bool {
	for _, f := range vs {
		for _, hop := range strings.Split(f, ",") {
			fields := strings.Fields(hop)
			if len(fields) >= 2 && strings.EqualFold(fields[1], pseudonym) {
				return true
			}
		}
	}
	return false
}
