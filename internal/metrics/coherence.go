package metrics

import "github.com/prometheus/client_golang/prometheus"

// newLateCounter counts writes answered before their invalidation was
// published: Redis did not take it within coherence.write_hold, so the
// promise's max_lag runs from the publish, not from the answer.
func newLateCounter() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace,
		Name:      "invalidations_late_total",
		Help:      "Writes answered before their invalidation was published (coherence.write_hold passed with Redis unreachable).",
	})
}

// InvalidationLate counts one write answered past coherence.write_hold.
func (m *Metrics) InvalidationLate() {
	if m == nil {
		return
	}
	m.late.Inc()
}
