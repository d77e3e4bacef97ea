package proxy

import (
	"net/http"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/metrics"
)

// Request directives (RFC 9111 §5.2.1) are honoured on freshness: origin
// routes only: there the origin's freshness is the contract, and a client
// may ask for a fresher (max-age, min-fresh) or accept a staler (max-stale)
// copy, or none from the network at all (only-if-cached). On a route-mode
// route the operator's ttl is the contract and they are ignored. A
// client's no-cache, max-age=0 or Pragma: no-cache forces a refresh only
// where the route's request_no_cache says refresh (the default in origin
// mode; in route mode they are ignored, as NGINX and Varnish ignore them),
// so that no client can turn the cache off for everyone (exchange.cached);
// no-store bypasses on every route (httpcache.BypassReason).

// directives are the request's Cache-Control directives, read once; only
// on an origin-mode route.
func (x *exchange) directives() *httpcache.Directives {
	if x.req == nil {
		d := httpcache.Parse(x.r.Header, "Cache-Control")
		if !x.rs.rt.RefreshOnRequest && d.MaxAge.Set && d.MaxAge.D == 0 {
			d.MaxAge = httpcache.Delta{} // request_no_cache: ignore
		}
		x.req = &d
	}
	return x.req
}

// freshEnough is needFresh's test: the entry is fresh, or acceptable to
// the request's directives (a max-stale never lifts the entry's own
// must-revalidate, §5.2.2.2).
func (x *exchange) freshEnough(e *cache.Entry, now time.Time) bool {
	if x.rs.rt.Origin == nil {
		return e.Fresh(now)
	}
	d := x.directives()
	if !d.MaxAge.Set && !d.MinFresh.Set && !d.MaxStale.Set {
		return e.Fresh(now)
	}
	return httpcache.Acceptable(*d, e.Age(now), e.TTL, e.NoStale)
}

// wantsFresher reports whether the request bounds the age or asks for
// freshness left (max-age, min-fresh): it then takes no stale copy served
// while a refresh runs.
func (x *exchange) wantsFresher() bool {
	if x.rs.rt.Origin == nil {
		return false
	}
	d := x.directives()
	return d.MaxAge.Set || d.MinFresh.Set
}

// onlyIfCached answers a request with only-if-cached (§5.2.1.7): from the
// tiers if an entry fits, else 504 without asking the upstream.
func (x *exchange) onlyIfCached() {
	c := x.lookup(x.r.Context(), false)
	if x.answers(c, needFresh) {
		x.respondEntry(outHit, c, 0)
		return
	}
	s := status{detail: "only-if-cached"} // not forwarded: no fwd (RFC 9211 §2.2)
	h := x.w.Header()
	h.Set("Cache-Status", s.String())
	h.Set("Content-Type", "text/plain; charset=utf-8")
	x.w.WriteHeader(http.StatusGatewayTimeout)
	_, _ = x.w.Write([]byte("not cached\n"))
	x.count(metrics.Miss)
}
