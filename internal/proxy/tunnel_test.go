package proxy_test

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

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/edge"
	"github.com/sidecache/sidecache/internal/proxy"
)

// tunnelGuard is how long a test client waits for a tunnel to end (or for
// its messages) before it calls it held: far longer than the idle bounds
// the tests set.
const tunnelGuard = 10 * time.Second

func withTunnelIdle(d time.Duration) envOpt {
	return func(o *proxy.Options, _ *l1.Store) { o.TunnelIdle = d }
}

// tunnelOrigin switches every request to websocket and hands the raw
// connection to serve; the connection is closed when serve returns, and
// ended is then closed.
func tunnelOrigin(t *testing.T, serve func(c net.Conn, r *bufio.Reader)) (up *upstream, ended chan struct{}) {
	ended = make(chan struct{})
	up = newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer close(ended)
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		if brw.Flush() == nil {
			serve(conn, brw.Reader)
		}
	})
	return up, ended
}

// openTunnel asks the sidecar to upgrade on a raw connection, checks the
// 101, and returns the connection (under a tunnelGuard deadline) with its
// reader.
func openTunnel(t *testing.T, front string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, br, resp := askUpgrade(t, front)
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d, want 101", resp.StatusCode)
	}
	return c, br
}

// tunnelCuts is sidecache_edge_refused_total{reason="tunnel-idle"}, 0
// while the series does not exist.
func tunnelCuts(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sidecache_edge_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "reason" && lp.GetValue() == edge.ReasonTunnelIdle {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// An upgraded connection over which nothing moves either way is closed,
// on both sides, once upstream.tunnel_idle_timeout has passed, and counted
// (probe h3 #3: the binary held an idle WebSocket tunnel, its two
// connections and its goroutines, for as long as both ends cared to stay).
func TestIdleTunnelIsClosed(t *testing.T) {
	up, ended := tunnelOrigin(t, func(c net.Conn, r *bufio.Reader) {
		_, _ = io.Copy(io.Discard, r) // until the sidecar closes its side
	})
	e := newEnv(t, up, nil, withTunnelIdle(200*time.Millisecond))
	_, br := openTunnel(t, e.front.URL)
	n, err := br.Read(make([]byte, 1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("idle tunnel still open after %v (tunnel_idle_timeout 200ms)", tunnelGuard)
	}
	if n != 0 || err == nil {
		t.Fatalf("read %d bytes, %v: want the end of the connection", n, err)
	}
	select {
	case <-ended:
	case <-time.After(tunnelGuard):
		t.Fatalf("upstream side of the idle tunnel still open after %v", tunnelGuard)
	}
	if got := tunnelCuts(t, e.reg); got != 1 {
		t.Errorf(`edge_refused_total{reason="tunnel-idle"} = %v, want 1`, got)
	}
}

// A tunnel that went quiet because its client stopped reading (the
// upstream's bytes wait in full socket buffers) is cut as well, the
// client's side included: ReverseProxy's copy to the client, blocked in
// its write, ends although server.write_timeout is off (0).
func TestTunnelToNonReadingClientIsClosed(t *testing.T) {
	up, ended := tunnelOrigin(t, func(c net.Conn, r *bufio.Reader) {
		chunk := []byte(strings.Repeat("x", 64<<10))
		for {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	})
	e := newEnv(t, up, nil, withTunnelIdle(200*time.Millisecond))
	returned := make(chan struct{})
	front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(returned)
		e.h.ServeHTTP(w, r)
	}))
	front.Listener = edge.Listener(front.Listener, 0, nil)
	edge.Wire(front.Config)
	front.Start()
	t.Cleanup(front.Close)
	openTunnel(t, front.URL) // and never read
	for name, ch := range map[string]chan struct{}{"upstream side": ended, "handler": returned} {
		select {
		case <-ch:
		case <-time.After(tunnelGuard):
			t.Fatalf("%s of a tunnel whose client stopped reading still held after %v", name, tunnelGuard)
		}
	}
	if got := tunnelCuts(t, e.reg); got != 1 {
		t.Errorf(`edge_refused_total{reason="tunnel-idle"} = %v, want 1`, got)
	}
}

// A tunnel whose bytes keep moving, in either direction alone or both, is
// never cut, however many idle periods it outlasts: the bound is on
// silence, not on the tunnel's age.
func TestBusyTunnelIsNotCut(t *testing.T) {
	const (
		idle = 500 * time.Millisecond
		gap  = 50 * time.Millisecond
		msgs = 40 // 2 s: four idle periods
	)
	line := func(i int) string { return fmt.Sprintf("m%02d\n", i) }
	cases := []struct {
		name   string
		origin func(c net.Conn, r *bufio.Reader)
		client func(t *testing.T, c net.Conn, r *bufio.Reader) int
	}{
		{"echo", func(c net.Conn, r *bufio.Reader) {
			_, _ = io.Copy(c, r)
		}, func(t *testing.T, c net.Conn, r *bufio.Reader) int {
			got := 0
			for i := range msgs {
				if _, err := io.WriteString(c, line(i)); err != nil {
					t.Fatalf("write %d: %v", i, err)
				}
				if s, err := r.ReadString('\n'); err != nil || s != line(i) {
					t.Fatalf("echo %d: %q, %v", i, s, err)
				}
				got++
				time.Sleep(gap)
			}
			return got
		}},
		{"upstream pushes", func(c net.Conn, r *bufio.Reader) {
			for i := range msgs {
				if _, err := io.WriteString(c, line(i)); err != nil {
					return
				}
				time.Sleep(gap)
			}
			_, _ = io.Copy(io.Discard, r)
		}, func(t *testing.T, c net.Conn, r *bufio.Reader) int {
			got := 0
			for i := range msgs {
				if s, err := r.ReadString('\n'); err != nil || s != line(i) {
					t.Fatalf("push %d: %q, %v", i, s, err)
				}
				got++
			}
			return got
		}},
		{"client pushes", func(c net.Conn, r *bufio.Reader) {
			n := 0
			for ; n < msgs; n++ {
				if _, err := r.ReadString('\n'); err != nil {
					break
				}
			}
			_, _ = fmt.Fprintf(c, "got %d\n", n)
			_, _ = io.Copy(io.Discard, r)
		}, func(t *testing.T, c net.Conn, r *bufio.Reader) int {
			for i := range msgs {
				if _, err := io.WriteString(c, line(i)); err != nil {
					t.Fatalf("write %d: %v", i, err)
				}
				time.Sleep(gap)
			}
			var got int
			if _, err := fmt.Fscanf(r, "got %d\n", &got); err != nil {
				t.Fatalf("upstream's count: %v", err)
			}
			return got
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up, _ := tunnelOrigin(t, tc.origin)
			e := newEnv(t, up, nil, withTunnelIdle(idle))
			c, br := openTunnel(t, e.front.URL)
			if got := tc.client(t, c, br); got != msgs {
				t.Fatalf("%d messages crossed, want %d", got, msgs)
			}
			if got := tunnelCuts(t, e.reg); got != 0 {
				t.Errorf(`edge_refused_total{reason="tunnel-idle"} = %v, want 0`, got)
			}
		})
	}
}
