package metrics

import "github.com/prometheus/client_golang/prometheus"

// bounds counts what the invalidation path's bounds refused or gave up:
// anyone can send a write, so each bound is a metric (a bound that is hit
// degrades, and says so).
type bounds struct {
	skipped   prometheus.Counter
	abandoned prometheus.Counter
	pending   prometheus.Gauge
	folded    prometheus.Counter
}

func newBounds() bounds {
	return bounds{
		skipped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "invalidation_tags_skipped_total",
			Help:      "Tags a write would have invalidated but skipped: longer than max_key_bytes, so no stored entry carries them.",
		}),
		abandoned: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "invalidation_replays_abandoned_total",
			Help:      "Tags whose failed L2 invalidation was given up: retried the most times while Redis answered, or the replay set was full.",
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace,
			Name:      "invalidation_replay_pending",
			Help:      "Tags whose L2 invalidation failed and waits to be replayed.",
		}),
		folded: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "tombstones_folded_total",
			Help:      "Invalidation tombstones folded into the hashed overflow filter because the tombstone budget was full.",
		}),
	}
}

// collectors are the bounds every replica can hit; l2Collectors those of
// the replay of failed L2 invalidations, registered only with L2 (Tiers).
func (b bounds) collectors() []prometheus.Collector {
	return []prometheus.Collector{b.skipped, b.folded}
}

func (b bounds) l2Collectors() []prometheus.Collector {
	return []prometheus.Collector{b.abandoned, b.pending}
}

// InvalidationSkipped counts n tags a write skipped as too long.
func (m *Metrics) InvalidationSkipped(n int) {
	if m != nil && n > 0 {
		m.bounds.skipped.Add(float64(n))
	}
}

// ReplayAbandoned counts n tags the replay of failed invalidations gave up.
func (m *Metrics) ReplayAbandoned(n int) {
	if m != nil && n > 0 {
		m.bounds.abandoned.Add(float64(n))
	}
}

// ReplayPending sets the number of tags waiting to be replayed.
func (m *Metrics) ReplayPending(n int) {
	if m != nil {
		m.bounds.pending.Set(float64(n))
	}
}

// TombstonesFolded counts n tombstones folded into the overflow filter.
func (m *Metrics) TombstonesFolded(n int) {
	if m != nil && n > 0 {
		m.bounds.folded.Add(float64(n))
	}
}
