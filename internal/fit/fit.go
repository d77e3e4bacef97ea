// Package fit is the freshness half of the fit rule (RFC 9111 §4.2,
// §5.2.1; RFC 5861): is a stored entry fresh enough for what the request
// needs of it — fresh, fresh or stale while it is revalidated, or stale
// because the upstream just failed — under the request's own directives.
// The other half (which variant, which coding, whose, invalidated since)
// needs the request's key and stays with the caller.
//
// Request directives are honoured on freshness: origin routes only: there
// the origin's freshness is the contract, and a client may ask for a
// fresher (max-age, min-fresh) or accept a staler (max-stale) copy. On a
// route-mode route the operator's ttl is the contract and they are
// ignored: its requests have no Directives (nil).
package fit

import (
	"net/http"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/httpcache"
)

// Need is how fresh an entry must be to answer.
type Need uint8

const (
	// Any: a response fetched for this very flight; its freshness is moot
	// (an uncacheable answer still answers the request that fetched it).
	Any Need = iota
	Fresh
	// Revalidate: fresh, or stale within stale-while-revalidate.
	Revalidate
	// IfError: within stale-if-error (the upstream just failed).
	IfError
)

// Directives are a request's Cache-Control directives as the rule reads
// them. refresh is the route's request_no_cache: a max-age=0 that does not
// refresh is ignored, like the no-cache it stands for.
func Directives(h http.Header, refresh bool) httpcache.Directives {
	d := httpcache.Parse(h, "Cache-Control")
	if !refresh && d.MaxAge.Set && d.MaxAge.D == 0 {
		d.MaxAge = httpcache.Delta{} // request_no_cache: ignore
	}
	return d
}

// Enough reports whether e, at now, is as fresh as n needs for a request
// with directives d (nil: a route-mode route's request).
func Enough(e *cache.Entry, n Need, d *httpcache.Directives, now time.Time) bool {
	switch n {
	case Fresh:
		return freshEnough(e, d, now)
	case Revalidate:
		return freshEnough(e, d, now) || !wantsFresher(d) && e.WithinStaleWhileRevalidate(now)
	case IfError:
		return e.WithinStaleIfError(now)
	}
	return true
}

// freshEnough is Fresh's test: the entry is fresh, or acceptable to the
// request's directives (a max-stale never lifts the entry's own
// must-revalidate, RFC 9111 §5.2.2.2).
func freshEnough(e *cache.Entry, d *httpcache.Directives, now time.Time) bool {
	if d == nil || !d.MaxAge.Set && !d.MinFresh.Set && !d.MaxStale.Set {
		return e.Fresh(now)
	}
	return httpcache.Acceptable(*d, e.Age(now), e.TTL, e.NoStale)
}

// wantsFresher reports whether the request bounds the age or asks for
// freshness left (max-age, min-fresh): it then takes no stale copy served
// while a refresh runs.
func wantsFresher(d *httpcache.Directives) bool {
	return d != nil && (d.MaxAge.Set || d.MinFresh.Set)
}
