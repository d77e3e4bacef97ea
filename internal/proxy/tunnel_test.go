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
	"sync"
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
//
// Silence is the sidecar's to measure, on the wall clock, so a test
// process the machine does not run for an idle period (a loaded 2-core
// box under -race) has a truly silent tunnel, which the sidecar rightly
// cuts. The test therefore bounds, from its own clocks, the longest
// silence the sidecar can have seen: every message is sent at sent[i] and
// received at recv[i], and the sidecar moved its bytes in between, so no
// silence exceeded recv[i+1]-sent[i] (nor recv[0] - the upgrade's start,
// nor the tunnel's end - the last send). A cut with that bound under the
// idle timeout is a defect; a cut after a longer stall proves nothing
// either way, and the attempt is run again.
func TestBusyTunnelIsNotCut(t *testing.T) {
	const (
		idle     = 500 * time.Millisecond
		gap      = 50 * time.Millisecond
		msgs     = 40 // 2 s: four idle periods
		attempts = 5
	)
	line := func(i int) string { return fmt.Sprintf("m%02d\n", i) }
	cases := []struct {
		name   string
		origin func(x *crossings, c net.Conn, r *bufio.Reader)
		client func(x *crossings, c net.Conn, r *bufio.Reader) (int, error)
	}{
		{"echo", func(x *crossings, c net.Conn, r *bufio.Reader) {
			_, _ = io.Copy(c, r)
		}, func(x *crossings, c net.Conn, r *bufio.Reader) (int, error) {
			got := 0
			for i := range msgs {
				x.send(i)
				if _, err := io.WriteString(c, line(i)); err != nil {
					return got, fmt.Errorf("write %d: %w", i, err)
				}
				if s, err := r.ReadString('\n'); err != nil || s != line(i) {
					return got, fmt.Errorf("echo %d: %q, %w", i, s, err)
				}
				x.recv(i)
				got++
				time.Sleep(gap)
			}
			return got, nil
		}},
		{"upstream pushes", func(x *crossings, c net.Conn, r *bufio.Reader) {
			for i := range msgs {
				x.send(i)
				if _, err := io.WriteString(c, line(i)); err != nil {
					return
				}
				time.Sleep(gap)
			}
			_, _ = io.Copy(io.Discard, r)
		}, func(x *crossings, c net.Conn, r *bufio.Reader) (int, error) {
			got := 0
			for i := range msgs {
				if s, err := r.ReadString('\n'); err != nil || s != line(i) {
					return got, fmt.Errorf("push %d: %q, %w", i, s, err)
				}
				x.recv(i)
				got++
			}
			return got, nil
		}},
		{"client pushes", func(x *crossings, c net.Conn, r *bufio.Reader) {
			n := 0
			for ; n < msgs; n++ {
				if _, err := r.ReadString('\n'); err != nil {
					break
				}
				x.recv(n)
			}
			_, _ = fmt.Fprintf(c, "got %d\n", n)
			_, _ = io.Copy(io.Discard, r)
		}, func(x *crossings, c net.Conn, r *bufio.Reader) (int, error) {
			for i := range msgs {
				x.send(i)
				if _, err := io.WriteString(c, line(i)); err != nil {
					return 0, fmt.Errorf("write %d: %w", i, err)
				}
				time.Sleep(gap)
			}
			var got int
			if _, err := fmt.Fscanf(r, "got %d\n", &got); err != nil {
				return 0, fmt.Errorf("upstream's count: %w", err)
			}
			return got, nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for a := 1; ; a++ {
				x := newCrossings(msgs)
				up, ended := tunnelOrigin(t, func(c net.Conn, r *bufio.Reader) { tc.origin(x, c, r) })
				e := newEnv(t, up, nil, withTunnelIdle(idle))
				x.start = time.Now()
				c, br := openTunnel(t, e.front.URL)
				got, err := tc.client(x, c, br)
				// End the tunnel from the client and wait for its upstream
				// side to close: any cut has been counted by then.
				c.Close()
				select {
				case <-ended:
				case <-time.After(tunnelGuard):
					t.Fatalf("upstream side still open %v after the client closed", tunnelGuard)
				}
				x.end = time.Now()
				cuts := tunnelCuts(t, e.reg)
				if err == nil && got == msgs && cuts == 0 {
					return
				}
				quiet := x.longestSilence()
				if quiet < idle {
					t.Fatalf("%d messages crossed (want %d), %v; edge_refused_total{reason=\"tunnel-idle\"} = %v (want 0), with no silence over %v", got, msgs, err, cuts, quiet)
				}
				t.Logf("attempt %d: the test's own clocks allow a %v silence (over the %v idle bound; a stalled machine): cut %v, %v", a, quiet, idle, cuts, err)
				if a == attempts {
					t.Fatalf("%d attempts each stalled past the idle bound", attempts)
				}
			}
		})
	}
}

// crossings records when each message of a tunnel test was sent and
// received, by whichever side did each.
type crossings struct {
	mu         sync.Mutex
	start, end time.Time
	sent, got  []time.Time
}

func newCrossings(n int) *crossings {
	return &crossings{sent: make([]time.Time, n), got: make([]time.Time, n)}
}

func (x *crossings) send(i int) { x.mu.Lock(); x.sent[i] = time.Now(); x.mu.Unlock() }
func (x *crossings) recv(i int) { x.mu.Lock(); x.got[i] = time.Now(); x.mu.Unlock() }

// longestSilence bounds the longest time the sidecar can have seen no byte
// cross: message i's bytes crossed between sent[i] and got[i]. A message
// never received (the tunnel ended first) ends the bound at the tunnel's
// end.
func (x *crossings) longestSilence() time.Duration {
	x.mu.Lock()
	defer x.mu.Unlock()
	longest, from := time.Duration(0), x.start
	for i := range x.sent {
		to := x.got[i]
		if to.IsZero() {
			break
		}
		longest = max(longest, to.Sub(from))
		from = x.sent[i]
	}
	return max(longest, x.end.Sub(from))
}
