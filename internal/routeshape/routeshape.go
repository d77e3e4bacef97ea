// Package routeshape says which of a route's metric series can move, from
// its settings alone (docs/metrics.md, "Series"), so that the proxy
// creates only those at zero: a write route only passes, a route that
// stores nothing never hits, only a batch route batches, only a fill
// behind an L2 lease takes one over.
//
// It mirrors the paths the proxy's classify stage sends a route's
// requests down; a series it leaves out that occurs anyway is created on
// first use (metrics.Shape), so a mismatch costs an up-front series,
// never a count.
package routeshape

import (
	"net/http"

	"github.com/sidecache/sidecache/internal/metrics"
	"github.com/sidecache/sidecache/internal/route"
)

// Of is rt's shape; leased: the proxy's fills take a cluster lease.
func Of(rt *route.Route, leased bool) metrics.Shape {
	var s metrics.Shape
	safe, unsafe := false, false
	for _, m := range rt.Methods {
		if m == http.MethodGet || m == http.MethodHead {
			safe = true
		} else {
			unsafe = true
		}
	}
	if unsafe {
		s.Results = append(s.Results, metrics.Pass)
	}
	switch {
	case !safe:
	case rt.Split != nil:
		s.Results = append(s.Results, metrics.Hit, metrics.Miss, metrics.Bypass)
	case !rt.Cacheable():
		if !unsafe {
			s.Results = append(s.Results, metrics.Pass)
		}
	default:
		s.Results = append(s.Results, metrics.Hit, metrics.Miss, metrics.Bypass, metrics.Collapsed)
		if !unsafe {
			s.Results = append(s.Results, metrics.Pass) // too large to store
		}
		if rt.StaleWhileRevalidate > 0 || rt.StaleIfError > 0 || rt.Origin != nil {
			s.Results = append(s.Results, metrics.Stale)
		}
		s.Coalesce, s.Batch, s.Lease = true, rt.Batch != nil, leased
	}
	return s
}
