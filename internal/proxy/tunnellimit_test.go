package proxy_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/edge"
	"github.com/sidecache/sidecache/internal/proxy"
)

// echoTunnels is an upstream that switches every request to websocket and
// echoes each line back until the client side closes, counting the
// upgrade requests it got.
func echoTunnels(t *testing.T) (*upstream, *atomic.Int64) {
	var got atomic.Int64
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		if brw.Flush() != nil {
			return
		}
		for {
			line, err := brw.ReadString('\n')
			if err != nil {
				return
			}
			if _, err := conn.Write([]byte(line)); err != nil {
				return
			}
		}
	})
	return up, &got
}

// askUpgrade sends an upgrade request on a new connection to front and
// returns the connection, its reader and the answer's status line.
func askUpgrade(t *testing.T, front string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(front, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(tunnelGuard))
	if _, err := io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, br, resp
}

// echoes reports whether the tunnel on c echoes a line.
func echoes(c net.Conn, br *bufio.Reader, line string) bool {
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return false
	}
	s, err := br.ReadString('\n')
	return err == nil && s == line+"\n"
}

// TestTunnelLimit: upstream.max_tunnels tunnels may be open at once; an
// upgrade request past it is answered 503 with Retry-After without
// reaching the upstream, counted as edge_refused{reason="tunnel-limit"},
// and a tunnel that closes gives its slot to the next. There was no
// bound: one client could hold any number of busy tunnels, each two
// connections and two goroutines.
func TestTunnelLimit(t *testing.T) {
	const limit = 3
	up, got := echoTunnels(t)
	e := newEnv(t, up, nil, func(o *proxy.Options, _ *l1.Store) { o.MaxTunnels = limit })
	var open []net.Conn
	for i := range limit {
		c, br, resp := askUpgrade(t, e.front.URL)
		if resp.StatusCode != http.StatusSwitchingProtocols || !echoes(c, br, "hello") {
			t.Fatalf("tunnel %d of %d: status %d, want 101 and its echo", i+1, limit, resp.StatusCode)
		}
		open = append(open, c)
	}
	_, _, resp := askUpgrade(t, e.front.URL)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("tunnel %d past upstream.max_tunnels %d: status %d, Retry-After %q; want 503 with Retry-After",
			limit+1, limit, resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if n := got.Load(); n != limit {
		t.Fatalf("upstream got %d upgrade requests, want %d (the refused one unsent)", n, limit)
	}
	if n := counter(t, e.reg, "sidecache_edge_refused_total", "reason", edge.ReasonTunnelLimit); n != 1 {
		t.Fatalf("edge_refused{reason=%q} = %v, want 1", edge.ReasonTunnelLimit, n)
	}

	// One tunnel ends: its slot frees once the sidecar has closed both its
	// sides, which it does on its own goroutine; an upgrade asked until
	// then is refused, unsent.
	open[0].Close()
	refused := 1
	deadline := time.Now().Add(time.Minute)
	for {
		c, br, resp := askUpgrade(t, e.front.URL)
		if resp.StatusCode == http.StatusSwitchingProtocols {
			if !echoes(c, br, "again") {
				t.Fatal("the tunnel opened in the freed slot does not echo")
			}
			break
		}
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("upgrade after a tunnel closed: status %d, want 101 (or 503 while it closes)", resp.StatusCode)
		}
		c.Close()
		refused++
		if time.Now().After(deadline) {
			t.Fatal("a closed tunnel's slot was not freed within a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := got.Load(); n != limit+1 {
		t.Errorf("upstream got %d upgrade requests, want %d", n, limit+1)
	}
	if n := counter(t, e.reg, "sidecache_edge_refused_total", "reason", edge.ReasonTunnelLimit); n != float64(refused) {
		t.Errorf("edge_refused{reason=%q} = %v, want %d", edge.ReasonTunnelLimit, n, refused)
	}
	for i, c := range open[1:] {
		if !echoes(c, bufio.NewReader(c), "still") {
			t.Errorf("tunnel %d no longer echoes", i+2)
		}
	}
}
