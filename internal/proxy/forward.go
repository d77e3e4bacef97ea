package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

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

// keptRules are the forwarding rules of the routes a Handler has served,
// by identity (name, pattern, key, forward_headers), shared by every
// table that has the route as it was: a reload that leaves a route so —
// or brings it back so, as the whole file does after a half-written one
// dropped it — keeps what its rules learned (the headers its answers'
// Vary named, the codings they came in). Else each reload made every
// route's rules anew, and reopened, for every route at once, the window
// in which a Vary'd header is learned again, with calls that left without
// the header and calls that carried it in flight together. The bulk calls
// still in flight on the old table's route teach the new one too. Rules
// are safe for concurrent use and only grow; a route whose identity
// changed starts afresh. Bounded: past maxKeptRules identities, a new one
// is not kept (it starts afresh at each reload, as every route did).
type keptRules struct {
	mu    sync.Mutex
	rules map[string]*forward.Rules
}

const maxKeptRules = 1024

func newKeptRules() *keptRules { return &keptRules{rules: map[string]*forward.Rules{}} }

// forwarding is rt's forwarding: the rules kept for its identity, or new
// ones.
func (k *keptRules) forwarding(rt *route.Route, log *slog.Logger, logged *forward.Logged) *forwarding {
	id := fmt.Sprintf("%q %q %t %#v", rt.Name, rt.Pattern, rt.ForwardAll, rt.Key)
	k.mu.Lock()
	defer k.mu.Unlock()
	r := k.rules[id]
	if r == nil {
		r = newForwarding(rt, log, logged).rules
		if len(k.rules) < maxKeptRules {
			k.rules[id] = r
		}
	}
	return &forwarding{rules: r, key: &rt.Key}
}

// withheld reports whether an answer that varies on names was fetched
// without one of them although the request carried it.
func (f *forwarding) withheld(r *http.Request, names []string) bool {
	return f.rules.Withheld(r.Header, names)
}

// sentWithout reports whether an answer that varies on names was fetched
// without one of them although the request carried it, judged by what the
// fetch sent (x.sent: a per-key fetch's own header, or for the elements
// of a bulk answer the bulk call's, set by fetchBulk), never by the
// route's rules as they are when the answer arrives: they may have
// learned the header since the call left (or been made anew by a reload),
// and the upstream answered what it was sent (RFC 9111 §4.1). With no
// record of what was sent, nothing counts as sent: strict for storage.
func (x *exchange) sentWithout(names []string) bool {
	return forward.SentWithout(x.r.Header, x.sent, names)
}

// sentUnvaried reports whether this request's fetch carried a header the
// route learned from Vary that the answer's Vary (names) does not name
// (forward.Rules.SentUnvaried): the answer may have been shaped by a
// header its key does not hold, so it is not stored nor shared. For the
// elements of a bulk answer x.sent is the bulk call's header without the
// Accept the call sets itself (fetchBulk), as elementVary judges it.
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

// neverForwarded reports the request fields no fetch of the cached path
// carries: hop-by-hop and conditional ones, Expect (the sidecar answers
// it: httpcache.IsExpect), and the client's Forwarded and X-Forwarded-*.
func neverForwarded(k string) bool {
	return httpcache.IsHopHeader(k) || httpcache.IsConditionalHeader(k) || httpcache.IsExpect(k) ||
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
