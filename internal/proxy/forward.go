package proxy

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strings"

	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/forward"
	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/route"
)

// forwarding holds a route's forwarding rules (internal/forward: which
// request headers reach the upstream on the cached path, and the batch
// group); these methods bind them to the request.
type forwarding struct {
	rules *forward.Rules
	key   *cachekey.Options // the route's key: its host rule (key.host)
}

func newForwarding(rt *route.Route, log *slog.Logger, logged *forward.Logged) *forwarding {
	return &forwarding{rules: forward.New(forward.Config{
		Route: rt.Name, All: rt.ForwardAll, Keyed: rt.Key.Headers, Never: neverForwarded, Log: log, Logged: logged,
	}), key: &rt.Key}
}

// withheld reports whether an answer that varies on names was fetched
// without one of them although the request carried it.
func (f *forwarding) withheld(r *http.Request, names []string) bool {
	return f.rules.Withheld(r.Header, names)
}

// sentWithout reports whether an answer that varies on names was fetched
// without one of them although the request carried it, judged by what the
// fetch sent (x.sent) when there was one of the request's own, else by the
// route's current rules (a bulk call carries the opener's headers, whose
// forwarded set is the route's).
func (x *exchange) sentWithout(names []string) bool {
	if x.sent != nil {
		return forward.SentWithout(x.r.Header, x.sent, names)
	}
	return x.rs.fwd.withheld(x.r, names)
}

// sentUnvaried reports whether this request's fetch carried a header the
// route learned from Vary that the answer's Vary (names) does not name
// (forward.Rules.SentUnvaried): the answer may have been shaped by a
// header its key does not hold, so it is not stored nor shared. The
// elements of a bulk answer are judged by the bulk call's header
// instead (elementVary); x.sent is nil for them.
func (x *exchange) sentUnvaried(names []string) bool {
	return x.sent != nil && x.rs.fwd.rules.SentUnvaried(x.sent, names)
}

// learnVary forwards, from now on, every header of names that the request
// carried but the route withheld; it reports whether it learned one.
func (f *forwarding) learnVary(r *http.Request, names []string) bool {
	return f.rules.LearnVary(r.Header, names)
}

// copyHeaders fills dst with what the route forwards of src. Hop-by-hop and
// conditional fields never go (the cache answers conditionals itself and
// wants a full response to store), nor do a client's Forwarded,
// X-Forwarded-*, Via, request id and trace context (forward.Own: the
// sidecar writes its own, never trusting the client's). A field the
// client's Connection names is hop-by-hop too (RFC 9110 §7.6.1): it is
// taken from what was copied by src's Connection, as Copy never copies
// Connection itself (nor any other hop-by-hop field: neverForwarded), so
// dst's own, which RemoveHopHeaders(dst) read, named nothing.
func (f *forwarding) copyHeaders(dst, src http.Header) {
	f.rules.Copy(dst, src)
	for _, v := range src["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				dst.Del(name)
			}
		}
	}
}

// group is the batch group of a request (forward.Rules.Group).
// The host is the one the key holds (key.host).
func (f *forwarding) group(r *http.Request) string {
	return f.rules.Group(f.key.KeyHost(r.Host), r.Header)
}

func neverForwarded(k string) bool {
	return httpcache.IsHopHeader(k) || httpcache.IsConditionalHeader(k) ||
		k == "Forwarded" || strings.HasPrefix(k, "X-Forwarded-")
}

// upstreamQuery is the query the cached path sends upstream: the
// parameters the key holds, as the client spelt them; the others are
// dropped as unkeyed headers are (cachekey.ForwardQuery).
func (x *exchange) upstreamQuery() string {
	return cachekey.ForwardQuery(x.r.URL.RawQuery, &x.rs.rt.Key)
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
	// The sidecar's own request id and trace context, never the client's
	// (forward.Own): the answer is stored for everyone, and one that
	// echoes a client's id would serve that client's text to all. The
	// access log keeps both for correlation.
	out.Header["X-Request-Id"] = []string{rand.Text()}
	if x.h.via != nil {
		out.Header["Via"] = x.h.via[:1:1] // ours alone: the client's is not forwarded here (forward.Own)
	}
	x.h.inject(ctx, out.Header)
	pr := httputil.ProxyRequest{In: in, Out: out}
	pr.SetURL(x.st.up)
	pr.SetXForwarded()
	// What reaches the upstream is what the key holds: with key.host set,
	// the upstream is told the canonical host (or none), never the one
	// this client spelled, which the shared entry does not record.
	if rt := x.rs.rt; rt != nil && (rt.Key.NoHost || rt.Key.Host != "") {
		k := rt.Key
		if h := k.KeyHost(in.Host); h != "" {
			out.Header.Set("X-Forwarded-Host", h)
		} else {
			out.Header.Del("X-Forwarded-Host")
		}
	}
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header.Set("User-Agent", "") // as ReverseProxy: do not add Go's
	}
	return out
}
