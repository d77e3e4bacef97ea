package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// batchVecs are the collectors only batch routes have series in: a route
// gets its series when the proxy asks for its BatchMetrics, so routes that
// do not batch add none (issue 22: series for routes that batch only).
type batchVecs struct {
	quarantined *prometheus.GaugeVec
	evictions   *prometheus.CounterVec
	budget      *prometheus.CounterVec
	notStored   *prometheus.CounterVec
	dropped     *prometheus.CounterVec
	tooLarge    *prometheus.CounterVec
}

// DroppedReasons are the reasons of sidecache_batch_dropped_total: an id
// refused because its group's queue was full (503), one failed because
// its batch was not sent within its deadline (504), one dropped unsent
// because every client waiting on it left.
var DroppedReasons = [...]string{"queue-full", "deadline", "abandoned"}

// TooLargeKinds are the kinds of sidecache_batch_too_large_total: a bulk
// answer cut at cache.max_body_bytes (its requests retried apart, or a
// one-id call's passed through), and a split list whose elements together
// are over it (passed through to the upstream's list).
var TooLargeKinds = [...]string{"answer", "list"}

func newBatchVecs() batchVecs {
	return batchVecs{
		quarantined: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace,
			Name:      "batch_quarantined",
			Help:      "IDs that made a bulk call fail and then failed alone, now fetched in calls of their own instead of joining batches, by route.",
		}, []string{"route"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "batch_quarantine_evictions_total",
			Help:      "Quarantined IDs forgotten early because the quarantine was full, by route.",
		}, []string{"route"}),
		budget: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "batch_budget_exhausted_total",
			Help:      "IDs of a list request answered 502 without an upstream call because the request had spent its upstream call budget, by route.",
		}, []string{"route"}),
		notStored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "batch_not_stored_total",
			Help:      "Elements of bulk answers that were not stored, by route and reason.",
		}, []string{"route", "reason"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "batch_dropped_total",
			Help:      "IDs of batched misses that never went upstream, by route and reason (queue-full: refused 503; deadline: not sent in time, 504; abandoned: every client waiting on them left).",
		}, []string{"route", "reason"}),
		tooLarge: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "batch_too_large_total",
			Help:      "Bulk answers read no further than cache.max_body_bytes (answer: its requests retried apart or passed through) and split lists over it (list: passed through), by batch route and kind.",
		}, []string{"route", "kind"}),
	}
}

// BatchMetrics are one batch route's series.
type BatchMetrics struct {
	quarantined prometheus.Gauge
	evictions   prometheus.Counter
	budget      prometheus.Counter
	notStored   *prometheus.CounterVec // curried with the route
	dropped     [len(DroppedReasons)]prometheus.Counter
	tooLarge    [len(TooLargeKinds)]prometheus.Counter
	mu          sync.Mutex
	reasons     map[string]prometheus.Counter
}

// Batch returns the route's batch series, creating them, with one
// not-stored series per reason the proxy can name (so a dashboard or alert
// reads 0, not an absent series). Call it for batch routes only.
func (rm *RouteMetrics) Batch(reasons ...string) *BatchMetrics {
	if rm == nil {
		return nil
	}
	v := rm.m.batch
	bm := &BatchMetrics{
		quarantined: v.quarantined.WithLabelValues(rm.name),
		evictions:   v.evictions.WithLabelValues(rm.name),
		budget:      v.budget.WithLabelValues(rm.name),
		notStored:   v.notStored.MustCurryWith(prometheus.Labels{"route": rm.name}),
		reasons:     map[string]prometheus.Counter{},
	}
	for _, r := range reasons {
		bm.reasons[r] = bm.notStored.WithLabelValues(r)
	}
	for i, r := range DroppedReasons {
		bm.dropped[i] = v.dropped.WithLabelValues(rm.name, r)
	}
	for i, k := range TooLargeKinds {
		bm.tooLarge[i] = v.tooLarge.WithLabelValues(rm.name, k)
	}
	return bm
}

// Dropped counts ids that never went upstream, for reason, one of
// DroppedReasons.
func (bm *BatchMetrics) Dropped(reason string, ids int) {
	if bm == nil {
		return
	}
	for i, r := range DroppedReasons {
		if r == reason {
			bm.dropped[i].Add(float64(ids))
		}
	}
}

// TooLarge counts one bulk answer or split list over max_body_bytes; kind
// is one of TooLargeKinds.
func (bm *BatchMetrics) TooLarge(kind string) {
	if bm == nil {
		return
	}
	for i, k := range TooLargeKinds {
		if k == kind {
			bm.tooLarge[i].Inc()
		}
	}
}

// Quarantined sets the number of ids quarantined.
func (bm *BatchMetrics) Quarantined(n int) {
	if bm != nil {
		bm.quarantined.Set(float64(n))
	}
}

// QuarantineEvicted counts one id forgotten to make room.
func (bm *BatchMetrics) QuarantineEvicted() {
	if bm != nil {
		bm.evictions.Inc()
	}
}

// BudgetExhausted counts ids failed because their request spent its calls.
func (bm *BatchMetrics) BudgetExhausted(ids int) {
	if bm != nil {
		bm.budget.Add(float64(ids))
	}
}

// NotStored counts one element not stored for reason, one of a small
// fixed set the proxy names.
func (bm *BatchMetrics) NotStored(reason string) {
	if bm == nil {
		return
	}
	bm.mu.Lock()
	c := bm.reasons[reason]
	if c == nil {
		c = bm.notStored.WithLabelValues(reason)
		bm.reasons[reason] = c
	}
	bm.mu.Unlock()
	c.Inc()
}
