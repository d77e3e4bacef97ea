package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// upstream.tunnel_idle_timeout reaches the proxy: a WebSocket tunnel over
// which nothing moves is closed, on both sides, and counted under
// sidecache_edge_refused_total{reason="tunnel-idle"}, a series that exists
// at zero once upgrades are allowed. Probe h3 #3: the binary held such a
// tunnel for as long as its ends stayed.
func TestIdleTunnelClosedThroughServer(t *testing.T) {
	ended := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer close(ended)
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		if brw.Flush() == nil {
			_, _ = io.Copy(io.Discard, brw) // until the sidecar closes its side
		}
	}))
	t.Cleanup(up.Close)
	rep := startReplicaYAML(t, fmt.Sprintf(edgeConfig, "  read_timeout: 60s", up.URL, "  allow_upgrades: [websocket]\n  tunnel_idle_timeout: 200ms"))
	if got, ok := edgeRefused(t, rep)["tunnel-idle"]; !ok || got != 0 {
		t.Fatalf(`tunnel-idle at start: %v (series present %v), want 0`, got, ok)
	}

	c, err := net.Dial("tcp", strings.TrimPrefix(rep.proxy, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v, %v: want 101", resp, err)
	}
	if _, err := br.ReadByte(); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("idle tunnel still open after 10s (tunnel_idle_timeout 200ms)")
	} else if err == nil {
		t.Fatal("a byte came over an idle tunnel")
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("upstream side of the idle tunnel still open after 10s")
	}
	if got := edgeRefused(t, rep)["tunnel-idle"]; got != 1 {
		t.Errorf("tunnel-idle counted %v, want 1", got)
	}
}
