package proxy

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/route"
)

// forwarding decides which request headers reach the upstream on a
// route's cached path. What the upstream sees shapes an answer that is then
// stored for everyone, so by default only what the key holds is forwarded:
// the headers named in key.headers, the normalised Accept-Encoding, the
// headers the route's answers were seen to Vary on, and tracing headers;
// plus the X-Forwarded-* the sidecar sets itself. Anything else a client
// sends (X-Original-URL, X-HTTP-Method-Override, a tenant header the
// operator forgot to key) cannot poison the shared answer. A route with
// forward_headers: all forwards everything, as a plain reverse proxy does.
type forwarding struct {
	route string
	all   bool
	keyed []string // canonical key.headers
	// learned are Vary'd header names seen on the route's answers
	// (copy-on-write; at most maxLearned).
	learned atomic.Pointer[[]string]
	mu      sync.Mutex
	// logged are withheld header names already logged (at most maxLogged).
	logged map[string]bool
	log    *slog.Logger
}

const (
	maxLearned = 32
	maxLogged  = 64
)

// tracingHeaders always reach the upstream: they identify a request, they
// do not shape its answer.
var tracingHeaders = [...]string{"Traceparent", "Tracestate", "X-Request-Id"}

func newForwarding(rt *route.Route, log *slog.Logger) *forwarding {
	f := &forwarding{route: rt.Name, all: rt.ForwardAll, keyed: rt.Key.Headers, logged: map[string]bool{}, log: log}
	f.learned.Store(&[]string{})
	return f
}

// forwards reports whether a (canonical) header reaches the upstream.
func (f *forwarding) forwards(name string) bool {
	return f.all || name == "Accept-Encoding" || slices.Contains(tracingHeaders[:], name) ||
		slices.Contains(f.keyed, name) || slices.Contains(*f.learned.Load(), name)
}

// withheld reports whether an answer that varies on names was fetched
// without one of them although the request carried it: the upstream then
// answered another variant than the one the key names.
func (f *forwarding) withheld(r *http.Request, names []string) bool {
	for _, n := range names {
		if _, sent := r.Header[n]; sent && !f.forwards(n) {
			return true
		}
	}
	return false
}

// learnVary forwards, from now on, every header of names that the request
// carried but the route withheld; it reports whether it learned one, so
// the caller can fetch again with it.
func (f *forwarding) learnVary(r *http.Request, names []string) bool {
	learned := false
	for _, n := range names {
		if _, sent := r.Header[n]; sent && !f.forwards(n) {
			learned = f.learn(n) || learned
		}
	}
	return learned
}

func (f *forwarding) learn(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := *f.learned.Load()
	if slices.Contains(cur, name) {
		return true
	}
	if len(cur) >= maxLearned {
		return false
	}
	next := append(slices.Clone(cur), name)
	f.learned.Store(&next)
	f.log.Info("forwarding a header the route's answers vary on", "route", f.route, "header", name)
	return true
}

// copyHeaders fills dst with what the route forwards of src. Hop-by-hop and
// conditional fields never go (the cache answers conditionals itself and
// wants a full response to store), nor do a client's Forwarded and
// X-Forwarded-* (replaced, as on pass-through, never trusted).
func (f *forwarding) copyHeaders(dst, src http.Header) {
	var withheld []string
	for k, vs := range src {
		switch {
		case neverForwarded(k):
		case k == "Accept-Encoding":
			dst[k] = []string{cachekey.NormalizeAcceptEncoding(strings.Join(vs, ","))}
		case f.forwards(k):
			dst[k] = vs
		default:
			withheld = append(withheld, k)
		}
	}
	removeHopHeaders(dst)
	if len(withheld) > 0 {
		f.logWithheld(withheld)
	}
}

// logWithheld tells the operator, once per route and header, that a header
// was not forwarded: an app that needs X-Api-Key then answers 401, and the
// log says why (fail closed, where forwarding it would have shared one
// client's answer with clients without a key).
func (f *forwarding) logWithheld(names []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range names {
		if f.logged[n] || len(f.logged) >= maxLogged {
			continue
		}
		f.logged[n] = true
		f.log.Warn("request header not forwarded on a cached route; list it in key.headers (or set forward_headers: all) if the upstream needs it",
			"route", f.route, "header", n)
	}
}

func neverForwarded(k string) bool {
	return slices.Contains(hopHeaders[:], k) || slices.Contains(conditionalHeaders[:], k) ||
		k == "Forwarded" || strings.HasPrefix(k, "X-Forwarded-")
}

// group is the batch group of a request: its host and the values of every
// header that reaches the upstream and could change the answer, in a
// canonical order. Requests of one group share one bulk call, which carries
// the opener's headers.
func (f *forwarding) group(r *http.Request) string {
	names := make([]string, 0, len(r.Header))
	for k := range r.Header {
		keyed := slices.Contains(f.keyed, k)
		if !keyed && (!f.forwards(k) || neverForwarded(k) || ignoredInGroup(k)) {
			continue
		}
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(strings.ToLower(r.Host))
	for _, k := range names {
		b.WriteByte('\n')
		b.WriteString(k)
		for _, v := range r.Header[k] {
			b.WriteByte('\x00')
			b.WriteString(v)
		}
	}
	return b.String()
}

// groupIgnored are forwarded request headers that do not change what the
// upstream answers for an id, so requests differing only in them may share
// a batch (the bulk call asks for JSON and decompresses itself). A header
// the route keys on always counts.
var groupIgnored = map[string]bool{
	"Accept": true, "Accept-Encoding": true, "User-Agent": true, "Referer": true, "Cache-Control": true, "Pragma": true,
	"Via": true, "X-Real-Ip": true, "Baggage": true, "Content-Length": true,
	"X-Vegeta-Seq": true, // the load generator's per-request counter
}

func ignoredInGroup(k string) bool {
	return groupIgnored[k] || slices.Contains(tracingHeaders[:], k) || strings.HasPrefix(k, "X-B3-")
}

// outgoing builds the upstream GET for the cached path with
// httputil.ProxyRequest, as pass-through does: SetURL, then SetXForwarded
// from the client's address, never from what the client claimed.
func (x *exchange) outgoing(ctx context.Context, path, rawQuery string) *http.Request {
	in := x.r
	u := &url.URL{Path: path, RawQuery: rawQuery}
	if path == in.URL.Path && in.URL.RawPath != "" {
		u.RawPath = in.URL.RawPath // a %2F stays one, as on pass-through
	}
	out := (&http.Request{
		Method: http.MethodGet, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: make(http.Header, len(in.Header)+3), Host: in.Host,
	}).WithContext(ctx)
	x.rs.fwd.copyHeaders(out.Header, in.Header)
	x.h.inject(ctx, out.Header)
	pr := httputil.ProxyRequest{In: in, Out: out}
	pr.SetURL(x.st.up)
	pr.SetXForwarded()
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header.Set("User-Agent", "") // as ReverseProxy: do not add Go's
	}
	return out
}
