package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// conns reports the proxy listener's connection bound
// (server.max_connections, internal/connlimit): how many client
// connections are open against it, and what it did when it was reached —
// an idle keep-alive connection closed to make room, or the listener
// paused with none to close (new connections then wait in the kernel's
// accept backlog, which only the pause shows).
//
// It also reports the bound on the bytes that the proxy listener's writes
// waiting on a full socket hold (server.max_pending_send_bytes,
// internal/sendbudget); the writes it cuts are counted in
// sidecache_edge_refused_total{reason="send-budget"}; and, with the same
// gauges, the bound on the bytes of header sections still being read, on
// both listeners (server.max_pending_header_bytes, internal/headerbudget),
// whose refusals are counted under reason="header-budget".
type conns struct {
	reaped prometheus.Counter
	waits  prometheus.Counter
	gauges *connGauges
	sends  *sendGauges
	heads  *sendGauges
}

func newConns() conns {
	return conns{
		reaped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "client_connections_reaped_total",
			Help:      "Idle keep-alive client connections closed to make room for a new one at server.max_connections, oldest idle first.",
		}),
		waits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "client_connection_waits_total",
			Help:      "Times the proxy listener stopped accepting at server.max_connections with no idle connection to close: new connections waited in the accept backlog until one ended.",
		}),
		gauges: &connGauges{
			open: prometheus.NewDesc(namespace+"_client_connections",
				"Client connections open on the proxy listener (upgraded ones included), bounded by server.max_connections.", nil, nil),
			max: prometheus.NewDesc(namespace+"_client_connections_max",
				"server.max_connections in force.", nil, nil),
		},
		sends: &sendGauges{
			bytes: prometheus.NewDesc(namespace+"_client_pending_send_bytes",
				"Bytes held by proxy-listener writes waiting for room in a client's socket (a client not reading its answer), a body written to several clients counted once; bounded by server.max_pending_send_bytes.", nil, nil),
			writes: prometheus.NewDesc(namespace+"_client_pending_sends",
				"Proxy-listener writes waiting for room in a client's socket.", nil, nil),
			max: prometheus.NewDesc(namespace+"_client_pending_send_bytes_max",
				"server.max_pending_send_bytes in force.", nil, nil),
		},
		heads: &sendGauges{
			bytes: prometheus.NewDesc(namespace+"_client_pending_header_bytes",
				"Bytes of request header sections still being read, on both listeners (a client sending a large header slowly, or stalled in it); a section that arrives whole is never counted. Bounded by server.max_pending_header_bytes.", nil, nil),
			writes: prometheus.NewDesc(namespace+"_client_pending_headers",
				"Connections, on both listeners, whose header section is still being read and is counted in sidecache_client_pending_header_bytes.", nil, nil),
			max: prometheus.NewDesc(namespace+"_client_pending_header_bytes_max",
				"server.max_pending_header_bytes in force.", nil, nil),
		},
	}
}

func (c conns) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.reaped, c.waits, c.gauges, c.sends, c.heads}
}

// sendGauges reports the send budget's state at scrape time, absent until
// SendSource is called.
type sendGauges struct {
	bytes, writes, max *prometheus.Desc
	src                atomic.Pointer[sendSource]
}

type sendSource struct{ bytes, writes, max func() int64 }

func (g *sendGauges) Describe(ch chan<- *prometheus.Desc) { ch <- g.bytes; ch <- g.writes; ch <- g.max }

func (g *sendGauges) Collect(ch chan<- prometheus.Metric) {
	s := g.src.Load()
	if s == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(g.bytes, prometheus.GaugeValue, float64(s.bytes()))
	ch <- prometheus.MustNewConstMetric(g.writes, prometheus.GaugeValue, float64(s.writes()))
	ch <- prometheus.MustNewConstMetric(g.max, prometheus.GaugeValue, float64(s.max()))
}

// SendSource makes sidecache_client_pending_send_bytes,
// sidecache_client_pending_sends and
// sidecache_client_pending_send_bytes_max report bytes, writes and max at
// scrape time.
func (m *Metrics) SendSource(bytes, writes, max func() int64) {
	if m == nil || bytes == nil || writes == nil || max == nil {
		return
	}
	m.conns.sends.src.Store(&sendSource{bytes: bytes, writes: writes, max: max})
}

// HeaderSource makes sidecache_client_pending_header_bytes,
// sidecache_client_pending_headers and
// sidecache_client_pending_header_bytes_max report bytes, conns and max
// at scrape time.
func (m *Metrics) HeaderSource(bytes, conns, max func() int64) {
	if m == nil || bytes == nil || conns == nil || max == nil {
		return
	}
	m.conns.heads.src.Store(&sendSource{bytes: bytes, writes: conns, max: max})
}

// connGauges reports the bound's state at scrape time, absent until
// ConnSource is called.
type connGauges struct {
	open, max *prometheus.Desc
	src       atomic.Pointer[connSource]
}

type connSource struct{ open, max func() int64 }

func (g *connGauges) Describe(ch chan<- *prometheus.Desc) { ch <- g.open; ch <- g.max }

func (g *connGauges) Collect(ch chan<- prometheus.Metric) {
	s := g.src.Load()
	if s == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(g.open, prometheus.GaugeValue, float64(s.open()))
	ch <- prometheus.MustNewConstMetric(g.max, prometheus.GaugeValue, float64(s.max()))
}

// ConnSource makes sidecache_client_connections and
// sidecache_client_connections_max report open and max at scrape time.
func (m *Metrics) ConnSource(open, max func() int64) {
	if m == nil || open == nil || max == nil {
		return
	}
	m.conns.gauges.src.Store(&connSource{open: open, max: max})
}

// ConnReaped counts an idle client connection closed to make room
// (connlimit.Counter).
func (m *Metrics) ConnReaped() {
	if m != nil {
		m.conns.reaped.Inc()
	}
}

// ConnWaited counts a pause of the proxy listener at its bound
// (connlimit.Counter).
func (m *Metrics) ConnWaited() {
	if m != nil {
		m.conns.waits.Inc()
	}
}
