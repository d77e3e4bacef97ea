package proxy

import (
	"net/http"

	"github.com/sidecache/sidecache/internal/fit"
	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/metrics"
	"github.com/sidecache/sidecache/internal/redisbudget"
)

// Request directives (RFC 9111 §5.2.1) are honoured on freshness: origin
// routes only (internal/fit). A client's no-cache, max-age=0 or Pragma:
// no-cache forces a refresh only where the route's request_no_cache says
// refresh (the default in origin mode; in route mode they are ignored, as
// NGINX and Varnish ignore them), so that no client can turn the cache off
// for everyone (exchange.cached); only-if-cached answers from the tiers or
// not at all; no-store bypasses on every route (httpcache.BypassReason).

// directives are the request's Cache-Control directives, read once; only
// on an origin-mode route.
func (x *exchange) directives() *httpcache.Directives {
	if x.req == nil {
		d := fit.Directives(x.r.Header, x.rs.rt.RefreshOnRequest)
		x.req = &d
	}
	return x.req
}

// freshDirectives are the directives the fit rule reads: none on a
// route-mode route, where the route's ttl is the contract.
func (x *exchange) freshDirectives() *httpcache.Directives {
	if x.rs.rt.Origin == nil {
		return nil
	}
	return x.directives()
}

// onlyIfCached answers a request with only-if-cached (§5.2.1.7): from the
// tiers if an entry fits, else 504 without asking the upstream.
func (x *exchange) onlyIfCached() {
	c := x.lookup(redisbudget.New(x.r.Context()), false) // a variant's reads share one budget
	if x.answers(c, needFresh) {
		x.respondEntry(outHit, c, 0)
		return
	}
	s := status{Detail: "only-if-cached"} // not forwarded: no fwd (RFC 9211 §2.2)
	h := x.w.Header()
	h.Set("Cache-Status", s.String())
	h.Set("Content-Type", "text/plain; charset=utf-8")
	x.w.WriteHeader(http.StatusGatewayTimeout)
	_, _ = x.w.Write([]byte("not cached\n"))
	x.count(metrics.Miss)
}
