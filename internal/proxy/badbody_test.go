package proxy_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A client's chunked body whose chunk size overflows (probe D6) is the
// client's failure, not the upstream's: 400, the connection closed, counted
// as edge_refused{reason="malformed"}, never as an upstream error (which
// any client could otherwise raise at will), on a write and on a plain
// pass-through alike.
func TestMalformedClientBodyIsTheClients(t *testing.T) {
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		t.Run(method, func(t *testing.T) {
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.WriteHeader(http.StatusNoContent)
			})
			e := newEnv(t, up, nil)
			c, err := net.Dial("tcp", e.front.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(stallGuard))
			_, _ = io.WriteString(c, method+" /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000001\r\nabc\r\n0\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("reading the answer: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !resp.Close {
				t.Fatalf("answer %d (close %v), want 400 and the connection closed", resp.StatusCode, resp.Close)
			}
			if n := labelled(t, e.reg, "sidecache_upstream_requests_total", "code", "error"); n != 0 {
				t.Errorf("upstream_requests_total{code=\"error\"} = %v, want 0: the failure is the client's", n)
			}
			if n := labelled(t, e.reg, "sidecache_edge_refused_total", "reason", "malformed"); n != 1 {
				t.Errorf("edge_refused_total{reason=\"malformed\"} = %v, want 1", n)
			}
		})
	}
}

// labelled is the sum of family name's counters with label=value, 0 when
// there are none.
func labelled(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}
