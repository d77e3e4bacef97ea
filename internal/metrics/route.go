package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Result is how the cache answered a client request; it is the result
// label of sidecache_requests_total and mirrors RFC 9211 Cache-Status.
type Result string

const (
	Hit       Result = "hit"       // served from L1 or L2
	Miss      Result = "miss"      // fetched from the upstream (and maybe stored)
	Stale     Result = "stale"     // served stale (while revalidating, or on upstream error)
	Bypass    Result = "bypass"    // the request may not use the cache (Authorization, Cookie, ...)
	Collapsed Result = "collapsed" // answered by another request's upstream call
	Pass      Result = "pass"      // no route, or a method the route does not cache
)

var results = [...]Result{Hit, Miss, Stale, Bypass, Collapsed, Pass}

// classes are the pre-resolved code labels; 1xx is rare enough (101 on a
// pass-through upgrade) to be resolved on demand.
var classes = [...]string{"2xx", "3xx", "4xx", "5xx", "error"}

// RouteMetrics holds one route's children, resolved once so the request
// path does no label lookups.
type RouteMetrics struct {
	m    *Metrics
	name string

	requests    [len(results)]prometheus.Counter
	requestDur  [len(results)]prometheus.Observer
	upstream    [len(classes)]prometheus.Counter
	upstreamDur prometheus.Observer
	coalesced   prometheus.Counter
	batchSize   prometheus.Observer
	isolations  prometheus.Counter
	overflows   prometheus.Counter
	takeovers   prometheus.Counter
}

// Shape says which of a route's series can occur, so that only those are
// created (at zero) up front: a series that cannot move is cardinality an
// operator pays for with nothing to see. A series outside the shape that
// occurs anyway is created on first use, so no count is ever lost.
type Shape struct {
	// Results the route can record in sidecache_requests_total.
	Results []Result
	// Coalesce: misses can wait on another request's upstream call.
	Coalesce bool
	// Batch: the route fetches by bulk upstream calls.
	Batch bool
	// Lease: fills take an L2 lease another replica may hold.
	Lease bool
}

// fullShape is every series, for Route (tests and callers that do not
// know the route's shape).
var fullShape = Shape{Results: results[:], Coalesce: true, Batch: true, Lease: true}

func newRouteMetrics(m *Metrics, name string, s Shape) *RouteMetrics {
	rm := &RouteMetrics{
		m:           m,
		name:        name,
		upstreamDur: m.upstreamDur.WithLabelValues(name),
	}
	if s.Coalesce {
		rm.coalesced = m.coalesced.WithLabelValues(name)
	}
	if s.Batch {
		rm.batchSize = m.batchSize.WithLabelValues(name)
		rm.isolations = m.isolations.WithLabelValues(name)
		rm.overflows = m.overflows.WithLabelValues(name)
	}
	if s.Lease {
		rm.takeovers = m.takeovers.WithLabelValues(name)
	}
	for _, r := range s.Results {
		if i := resultIndex(r); i >= 0 {
			rm.requests[i] = m.requests.WithLabelValues(name, string(r))
			rm.requestDur[i] = m.requestDur.WithLabelValues(name, string(r))
		}
	}
	for i, c := range classes {
		rm.upstream[i] = m.upstream.WithLabelValues(name, c)
	}
	return rm
}

// Name is the route label this RouteMetrics records under.
func (rm *RouteMetrics) Name() string {
	if rm == nil {
		return ""
	}
	return rm.name
}

// Request records one answered client request and its duration.
func (rm *RouteMetrics) Request(result Result, d time.Duration) {
	if rm == nil {
		return
	}
	i := resultIndex(result)
	if i < 0 || rm.requests[i] == nil {
		rm.m.requests.WithLabelValues(rm.name, string(result)).Inc()
		rm.m.requestDur.WithLabelValues(rm.name, string(result)).Observe(d.Seconds())
		return
	}
	rm.requests[i].Inc()
	rm.requestDur[i].Observe(d.Seconds())
}

// Upstream records one upstream call: code is the response status, or 0
// (or negative) when no response came back (timeout, refused, reset).
func (rm *RouteMetrics) Upstream(code int, d time.Duration) {
	if rm == nil {
		return
	}
	rm.upstreamDur.Observe(d.Seconds())
	switch c := StatusClass(code); c {
	case "2xx":
		rm.upstream[0].Inc()
	case "3xx":
		rm.upstream[1].Inc()
	case "4xx":
		rm.upstream[2].Inc()
	case "5xx":
		rm.upstream[3].Inc()
	case "error":
		rm.upstream[4].Inc()
	default:
		rm.m.upstream.WithLabelValues(rm.name, c).Inc()
	}
}

// Coalesced counts one request that waited on another's upstream call.
func (rm *RouteMetrics) Coalesced() {
	if rm == nil {
		return
	}
	if rm.coalesced == nil {
		rm.m.coalesced.WithLabelValues(rm.name).Inc()
		return
	}
	rm.coalesced.Inc()
}

// BatchSize records the number of IDs in one bulk upstream call.
func (rm *RouteMetrics) BatchSize(n int) {
	if rm == nil {
		return
	}
	if rm.batchSize == nil {
		rm.m.batchSize.WithLabelValues(rm.name).Observe(float64(n))
		return
	}
	rm.batchSize.Observe(float64(n))
}

func resultIndex(r Result) int {
	switch r {
	case Hit:
		return 0
	case Miss:
		return 1
	case Stale:
		return 2
	case Bypass:
		return 3
	case Collapsed:
		return 4
	case Pass:
		return 5
	}
	return -1
}

// StatusClass maps an HTTP status to its class label ("1xx" .. "5xx");
// anything outside 100..599, including 0 for "no response", is "error".
func StatusClass(code int) string {
	switch {
	case code >= 100 && code < 200:
		return "1xx"
	case code >= 200 && code < 300:
		return "2xx"
	case code >= 300 && code < 400:
		return "3xx"
	case code >= 400 && code < 500:
		return "4xx"
	case code >= 500 && code < 600:
		return "5xx"
	}
	return "error"
}

// BatchIsolated counts one failed bulk call of size ids being split in
// halves to find the ids at fault (the batch loader's OnIsolate).
func (rm *RouteMetrics) BatchIsolated(size int) {
	if rm == nil {
		return
	}
	if rm.isolations == nil {
		rm.m.isolations.WithLabelValues(rm.name).Inc()
		return
	}
	rm.isolations.Inc()
}

// BatchOverflow counts one lookup fetched alone because the loader held
// its maximum of batch groups (the batch loader's OnOverflow): a client
// varying the headers that pick a group, or a max_groups set too low.
func (rm *RouteMetrics) BatchOverflow() {
	if rm == nil {
		return
	}
	if rm.overflows == nil {
		rm.m.overflows.WithLabelValues(rm.name).Inc()
		return
	}
	rm.overflows.Inc()
}

// LeaseTakeover counts one wait on another replica's lease that ended
// without its fill: the holder died or lost Redis, and this replica tries
// the lease itself.
func (rm *RouteMetrics) LeaseTakeover() {
	if rm == nil {
		return
	}
	if rm.takeovers == nil {
		rm.m.takeovers.WithLabelValues(rm.name).Inc()
		return
	}
	rm.takeovers.Inc()
}
