package metrics

import "github.com/prometheus/client_golang/prometheus"

// newEdgeRefused counts what the listeners' edge (internal/edge) refuses
// before a request reaches the proxy, and the connections it cuts: these
// never reach sidecache_requests_total, which counts answers by how the
// cache made them. Its reasons are edge's (edge.Reason*), a closed set.
func newEdgeRefused() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace,
		Name:      "edge_refused_total",
		Help:      "Requests the listeners refused before the proxy (framing: 400, asterisk-form: 400, read-timeout: 408, loop: 508, trace: 405; net/http's own answers: header-too-large: 431, malformed: 400, 417, 501, 505) and connections cut (write-timeout: the client stopped reading; tunnel-idle: an upgraded connection idle for upstream.tunnel_idle_timeout) and upgrade requests refused 503 unsent (tunnel-limit: upstream.max_tunnels tunnels open), by reason.",
	}, []string{"reason"})
}

// EdgeReasons creates the edge_refused_total series of reasons at zero:
// the ones the configured edge can count (edge.Reasons).
func (m *Metrics) EdgeReasons(reasons ...string) {
	if m == nil {
		return
	}
	for _, r := range reasons {
		m.edge.WithLabelValues(r)
	}
}

// EdgeRefused counts one refused request or cut connection. Refusals are
// rare: the label lookup is not worth a pre-resolved child.
func (m *Metrics) EdgeRefused(reason string) {
	if m == nil {
		return
	}
	m.edge.WithLabelValues(reason).Inc()
}
