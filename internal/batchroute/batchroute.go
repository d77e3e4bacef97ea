// Package batchroute turns a batch route's configuration (route.Batch)
// into its loader's bounds (batch.Options), and reports what the loader
// does to the route's metrics. The bounds' reasons sit here, next to the
// numbers: how many rounds of calls a group may queue, how many groups'
// calls a route carries at once when batch.max_route_in_flight is unset,
// how long a bad id stays quarantined when negative_ttl is 0. What a bulk
// call is, and whom its answers answer, is the proxy's and
// internal/bulkanswer's.
package batchroute

import (
	"errors"
	"time"

	"github.com/sidecache/sidecache/internal/batch"
	"github.com/sidecache/sidecache/internal/metrics"
	"github.com/sidecache/sidecache/internal/route"
)

// Hooks are what the loader of a route needs of its caller besides the
// route's config and metrics.
type Hooks struct {
	// Timeout is upstream.timeout, read as each batch opens, so that a
	// reloaded timeout applies at once.
	Timeout func() time.Duration
	Now     func() time.Time
	// Refused reports whether a value is the upstream's own failing
	// answer to a one-id call (batch.Options.Refused).
	Refused func(v any) bool
	// OnPanic is told of a bulk call that panicked (batch.Options.OnPanic).
	OnPanic func(v any, stack []byte)
}

// Options are the loader options of batch route rt, whose metrics are m
// and bm.
func Options(rt *route.Route, m *metrics.RouteMetrics, bm *metrics.BatchMetrics, h Hooks) batch.Options {
	b := rt.Batch
	quarantine := rt.NegativeTTL
	if quarantine <= 0 {
		quarantine = defaultQuarantine
	}
	timeout := h.Timeout
	return batch.Options{MaxSize: b.MaxSize, MaxWait: b.MaxWait, MaxInFlight: b.MaxInFlight,
		MaxQueued:      queuedRounds * max(b.MaxSize, 1) * inFlight(b.MaxInFlight),
		MaxInFlightAll: routeInFlight(b),
		MaxQueuedAll:   queuedRounds * max(b.MaxSize, 1) * routeInFlight(b),
		// A batch goes within its window and one in-flight call's time
		// (each call ends within upstream.timeout), or fails 504: read
		// as each batch opens, so a reloaded timeout applies at once.
		Deadline: func() time.Duration { return b.MaxWait + timeout() },
		OnDrop:   func(reason error, ids int) { bm.Dropped(droppedReason(reason), ids) },
		OnBatch:  m.BatchSize, OnIsolate: m.BatchIsolated, OnOverflow: m.BatchOverflow,
		Quarantine: quarantine, Now: h.Now,
		Refused:      h.Refused,
		OnQuarantine: bm.Quarantined, OnEvict: bm.QuarantineEvicted, OnBudget: bm.BudgetExhausted,
		OnPanic: h.OnPanic,
	}
}

// defaultQuarantine is how long an id that failed a bulk call and then
// failed alone is fetched alone when the route's negative_ttl is 0:
// negative_ttl 0 promises that no failed answer is served from memory, and
// the quarantine serves none (each of its ids still gets its own call), so
// it still applies, for a short while.
const defaultQuarantine = 10 * time.Second

// queuedRounds is how many rounds of bulk calls (max_size ids times
// max_in_flight calls each) a batch group may hold queued behind its
// calls in flight (batch.Options.MaxQueued): past it a miss is refused
// 503 at once (batch.ErrQueueFull) rather than queued for a deadline it
// would miss. A group with nothing queued takes one request of any size,
// so a list of split.max_ids ids is never refused by an idle group;
// otherwise lists may hold ¾ of it, the rest left to one-id misses, whose
// batches also go ahead of a list's queued calls every other call
// (batch.Options.MaxQueued). Fourteen, not ten: at defaults (max_size
// 100, max_in_flight 2) the lists' share is then 2,100 ids, so two lists
// of the default split.max_ids (1,000) fit at once, as they did before
// the share.
const queuedRounds = 14

// inFlight is max_in_flight as the loader reads it (unset: the default).
func inFlight(n int) int {
	if n < 1 {
		return batch.DefaultMaxInFlight
	}
	return n
}

// routeGroups is how many groups' max_in_flight the route's bulk calls
// may number at once by default (batch.max_route_in_flight, which the
// config fills with the same product). A group is what the requests
// forward (the Host, keyed headers), and a client chooses it: bounded
// per group only, one client spelling its Host 1,024 ways had the bulk
// endpoint carry 2,048 calls and the route queue 2.8 M ids. Varnish's
// backend .max_connections and NGINX's server max_conns bound what a
// backend carries whatever clients send, and so does this; not to
// max_in_flight itself, which the contract makes per group: a route
// keyed on a header with a few values (Accept-Language) or reached under
// a couple of Host spellings would then see its groups' calls wait for
// one another, throughput cut by their number. Four groups' worth keeps
// those at full speed and the upstream's load a small stated multiple of
// what the operator set; the queue bound follows it (MaxQueuedAll).
const routeGroups = 4

// routeInFlight is max_route_in_flight as the loader reads it (unset:
// routeGroups groups' max_in_flight).
func routeInFlight(b *route.Batch) int {
	if b.MaxRouteInFlight > 0 {
		return b.MaxRouteInFlight
	}
	return routeGroups * inFlight(b.MaxInFlight)
}

// droppedReason is the sidecache_batch_dropped_total reason of a
// batch.Options.OnDrop reason (metrics.DroppedReasons).
func droppedReason(err error) string {
	switch {
	case errors.Is(err, batch.ErrQueueFull):
		return "queue-full"
	case errors.Is(err, batch.ErrDeadline):
		return "deadline"
	}
	return "abandoned"
}
