package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/proxy"
)

// deafOrigin accepts connections and never reads them: an app server whose
// workers are all busy, its connections in the backlog. closed gets one
// value per connection the sidecar closed (read to its end once released:
// what the sidecar had queued, then EOF or a reset).
type deafOrigin struct {
	url    *url.URL
	conns  chan net.Conn
	closed chan struct{}
}

func newDeafOrigin(t *testing.T) *deafOrigin {
	t.Helper()
	// A small receive buffer (inherited by the accepted connections):
	// the sidecar's writes fill it, and its own send buffer, sooner.
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10)
		})
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	o := &deafOrigin{conns: make(chan net.Conn, 16), closed: make(chan struct{}, 16)}
	o.url, _ = url.Parse("http://" + ln.Addr().String())
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			o.conns <- c
		}
	}()
	return o
}

// drained reads c to its end (the sidecar closed it) within the guard.
func drained(c net.Conn) error {
	_ = c.SetReadDeadline(time.Now().Add(stallGuard))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return fmt.Errorf("the upstream connection was still open after %v", stallGuard)
	}
	return nil
}

// A large request body to an upstream that takes no byte of it must not
// be held for good (probe D2: no answer at 240 s with upstream.timeout 3s,
// the upstream socket still open 70 s after the client left): once the
// upstream took nothing for upstream.timeout, the sidecar closes its
// connection, answers 504, and counts an upstream error (NGINX's
// proxy_send_timeout). On every way a body goes upstream: a write (POST,
// detached from the client), a plain pass-through (a GET with a body), and
// one behind Expect: 100-continue (the sidecar's own 100: TestExpectAnsweredBySidecar).
func TestBodyToDeafUpstreamIsCut(t *testing.T) {
	const size = 64 << 20 // far past the socket buffers
	// The write route invalidates its tag after a write: one cut once its
	// header went out may have been applied in part (lenient for
	// invalidation), and invalidates too.
	writes := testRoute{Name: "noread", Methods: []string{http.MethodPost, http.MethodPut}, Pattern: "/noread/{id}", Invalidate: []string{"n:{id}"}}
	cases := []struct {
		name, method string
		hdr          string
		invalidated  float64
	}{
		{"write", http.MethodPost, "", 1},
		{"pass-through", http.MethodGet, "", 0},
		{"expect-continue", http.MethodPut, "Expect: 100-continue\r\n", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			origin := newDeafOrigin(t)
			e := newEnv(t, &upstream{}, []testRoute{writes}, withStallTimeout, withL1Invalidator, func(o *proxy.Options, _ *l1.Store) { o.Upstream = origin.url })

			c, err := net.Dial("tcp", e.front.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(stallGuard))
			go func() {
				fmt.Fprintf(c, "%s /noread/2 HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n%s\r\n", tc.method, size, tc.hdr)
				chunk := bytes.Repeat([]byte("b"), 64<<10)
				for n := 0; n < size; n += len(chunk) {
					if _, err := c.Write(chunk); err != nil {
						return // the sidecar stopped reading and closed
					}
				}
			}()
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			for err == nil && resp.StatusCode < 200 { // 100 Continue: the server asked for the body
				resp, err = http.ReadResponse(br, nil)
			}
			if err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatalf("no answer after %v: the body to an upstream that never reads was held", stallGuard)
				}
				t.Fatalf("reading the answer: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusGatewayTimeout || string(body) != "upstream timeout\n" {
				t.Fatalf("answer %d %q, want 504 upstream timeout", resp.StatusCode, body)
			}
			if err := drained(await(t, origin.conns)); err != nil {
				t.Fatal(err)
			}
			if got := labelled(t, e.reg, "sidecache_upstream_requests_total", "code", "error"); got != 1 {
				t.Errorf("upstream_requests_total{code=\"error\"} = %v, want 1", got)
			}
			if got := labelled(t, e.reg, "sidecache_invalidations_total", "source", "write"); got != tc.invalidated {
				t.Errorf("invalidations_total{source=\"write\"} = %v, want %v", got, tc.invalidated)
			}
		})
	}
}

// The lean pass-through sends no body; a request header near the front
// server's bound (here net/http's 1 MiB; server.max_header_bytes is 64 KiB
// by default) to an upstream that never reads fits the sockets' buffers
// (the sidecar's send buffer grows to ~4 MB on loopback), and the wait for
// the answer's header ends it: 504 at upstream.timeout. A guard, which
// passed before the write bound too.
func TestLargeHeaderToDeafUpstreamIsCut(t *testing.T) {
	origin := newDeafOrigin(t)
	e := newEnv(t, &upstream{}, nil, withStallTimeout, func(o *proxy.Options, _ *l1.Store) { o.Upstream = origin.url })
	c, err := net.Dial("tcp", e.front.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(stallGuard))
	var req bytes.Buffer
	req.WriteString("GET /noread/1 HTTP/1.1\r\nHost: x\r\n")
	for i := 0; i < 15; i++ {
		fmt.Fprintf(&req, "X-Big-%d: %s\r\n", i, bytes.Repeat([]byte("h"), 64<<10))
	}
	req.WriteString("\r\n")
	if _, err := c.Write(req.Bytes()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("status %d, want 504", resp.StatusCode)
	}
}
