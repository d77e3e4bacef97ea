package routeshape_test

import (
	"slices"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/metrics"
	"github.com/sidecache/sidecache/internal/route"
	"github.com/sidecache/sidecache/internal/routeshape"
)

func TestOf(t *testing.T) {
	const (
		pass      = metrics.Pass
		hit       = metrics.Hit
		miss      = metrics.Miss
		bypass    = metrics.Bypass
		collapsed = metrics.Collapsed
		stale     = metrics.Stale
	)
	get := []string{"GET"}
	tests := []struct {
		name   string
		rt     route.Route
		leased bool
		want   metrics.Shape
	}{
		{"write route only passes", route.Route{Methods: []string{"POST", "PUT"}, TTL: time.Minute}, true,
			metrics.Shape{Results: []metrics.Result{pass}}},
		{"uncached read passes", route.Route{Methods: get}, true,
			metrics.Shape{Results: []metrics.Result{pass}}},
		{"uncached read and write: one pass", route.Route{Methods: []string{"GET", "POST"}}, false,
			metrics.Shape{Results: []metrics.Result{pass}}},
		{"cached read", route.Route{Methods: get, TTL: time.Minute}, false,
			metrics.Shape{Results: []metrics.Result{hit, miss, bypass, collapsed, pass}, Coalesce: true}},
		{"cached read, leased, stale window", route.Route{Methods: get, TTL: time.Minute, StaleIfError: time.Minute}, true,
			metrics.Shape{Results: []metrics.Result{hit, miss, bypass, collapsed, pass, stale}, Coalesce: true, Lease: true}},
		{"origin freshness may serve stale", route.Route{Methods: get, Origin: &route.Origin{}}, false,
			metrics.Shape{Results: []metrics.Result{hit, miss, bypass, collapsed, pass, stale}, Coalesce: true}},
		{"batch route batches", route.Route{Methods: get, TTL: time.Minute, Batch: &route.Batch{}}, false,
			metrics.Shape{Results: []metrics.Result{hit, miss, bypass, collapsed, pass}, Coalesce: true, Batch: true}},
		{"cached read and write: pass once, first", route.Route{Methods: []string{"GET", "DELETE"}, TTL: time.Minute}, false,
			metrics.Shape{Results: []metrics.Result{pass, hit, miss, bypass, collapsed}, Coalesce: true}},
		{"split list: no collapse, no lease", route.Route{Methods: get, Split: &route.Split{}}, true,
			metrics.Shape{Results: []metrics.Result{hit, miss, bypass}}},
	}
	for _, tc := range tests {
		got := routeshape.Of(&tc.rt, tc.leased)
		if !slices.Equal(got.Results, tc.want.Results) || got.Coalesce != tc.want.Coalesce || got.Batch != tc.want.Batch || got.Lease != tc.want.Lease {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
