package proxy

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/forward"
	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/route"
	"github.com/sidecache/sidecache/internal/upreq"
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

// outgoing builds the upstream GET for the cached path (internal/upreq):
// what the key holds of x's request, and what the sidecar writes itself.
func (x *exchange) outgoing(ctx context.Context, path, rawQuery string) *http.Request {
	t := upreq.Target{Up: x.st.up, Rules: x.rs.fwd.rules, Key: &x.rs.rt.Key, Via: x.h.via, Trace: x.h.tr != nil}
	return t.Get(ctx, x.r, path, rawQuery)
}
