package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/proxy"
)

// rawUp is an upstream on a real socket that answers each request with
// bytes of the test's choosing, and reports each connection the sidecar
// closed (or that serve closed itself).
type rawUp struct {
	url    string
	closed chan struct{}
	mu     sync.Mutex
	conns  []net.Conn
}

// closeAll closes the upstream's side of every connection.
func (u *rawUp) closeAll() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, c := range u.conns {
		c.Close()
	}
}

func newRawUp(t *testing.T, serve func(c net.Conn)) *rawUp {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUp{url: "http://" + ln.Addr().String(), closed: make(chan struct{}, 64)}
	t.Cleanup(func() {
		ln.Close()
		u.closeAll()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			u.conns = append(u.conns, c)
			u.mu.Unlock()
			go func() {
				defer func() { u.closed <- struct{}{} }()
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				serve(c)
				_, _ = io.Copy(io.Discard, c) // until the sidecar closes it
			}()
		}
	}()
	return u
}

// waitClosed waits for the sidecar to close an upstream connection; the
// timer is a hang guard, not a measurement.
func (u *rawUp) waitClosed(t *testing.T, why string) {
	t.Helper()
	select {
	case <-u.closed:
	case <-time.After(10 * time.Second):
		t.Errorf("%s: the upstream connection is still open", why)
		u.closeAll() // so that the sidecar's handler returns
	}
}

// edgePath is one way a request reaches the upstream.
type edgePath struct {
	name   string
	target string
	pad    int // body bytes sent before the misbehaviour: over max_body_bytes on the cached path, so it streams
	opts   []envOpt
}

// edgeMaxHeader is the header bound of every edge path: small, so that a
// header line that never ends reaches it in a few writes. At the default
// 10 MiB, reading up to the bound under -race on a loaded machine took
// longer than the 2 s upstream timeout the tests then had, and the row saw
// the timeout's 504.
const edgeMaxHeader = 64 << 10

func withMaxHeader(o *proxy.Options, _ *l1.Store) { o.MaxHeaderBytes = edgeMaxHeader }

var edgePaths = []edgePath{
	{name: "lean", target: "/other", opts: []envOpt{withMaxHeader}},
	{name: "reverseproxy", target: "/other", opts: []envOpt{withMaxHeader, func(o *proxy.Options, _ *l1.Store) {
		// A transport of its own: the handler takes the ReverseProxy way.
		o.Transport = &http.Transport{ResponseHeaderTimeout: 30 * time.Second, MaxResponseHeaderBytes: edgeMaxHeader}
	}}},
	{name: "cached", target: "/clients/1", pad: 1<<20 + 1, opts: []envOpt{withMaxHeader}},
}

func chunk(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

// Every pass-through path — the lean loop, ReverseProxy, the cached fill
// and its large-body stream — goes through one table of misbehaving
// upstreams and clients, so that a rule added to one path cannot be
// forgotten on another (issue 21):
//
//   - a body broken off, chunked or short of its Content-Length, reaches
//     the client broken, never as a whole answer (RFC 9112 §8);
//   - a status line below 100 is a 502 and the connection is closed;
//   - a header line that never ends is a 502 at the header bound, not
//     memory and the upstream timeout;
//   - a flood of 1xx is not relayed whole; no 1xx reaches an HTTP/1.0
//     client (RFC 9110 §15.2);
//   - trailers that may not be trailers (RFC 9110 §6.5.1), those the
//     answer's Connection names (§7.6.1) and the tag headers are
//     dropped, and the others arrive, announced or not;
//   - a client that leaves mid-body ends the upstream request.
func TestEdgesEveryPath(t *testing.T) {
	const flood = 50
	rows := []struct {
		name   string
		serve  func(c net.Conn, pad string)
		client func(t *testing.T, e *env, target string) string // what happened
		want   string
		closes bool // the sidecar must close the upstream connection
	}{
		{
			name: "chunked body broken off",
			serve: func(c net.Conn, pad string) {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"+pad+chunk("hello"))
				c.Close()
			},
			client: getBody, want: "broken",
		},
		{
			name: "body short of its Content-Length",
			serve: func(c net.Conn, pad string) {
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%shello", len(pad)+10, pad)
				c.Close()
			},
			client: getBody, want: "broken",
		},
		{
			name: "status below 100",
			serve: func(c net.Conn, _ string) {
				io.WriteString(c, "HTTP/1.1 099 Nope\r\nContent-Length: 2\r\n\r\nok")
			},
			client: getBody, want: "502", closes: true,
		},
		{
			name: "header line that never ends",
			serve: func(c net.Conn, _ string) {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Long: ")
				line := strings.Repeat("a", 64<<10)
				for {
					if _, err := io.WriteString(c, line); err != nil {
						return
					}
				}
			},
			client: getBody, want: "502", closes: true,
		},
		{
			name: "1xx without end",
			serve: func(c net.Conn, _ string) {
				hint := "HTTP/1.1 103 Early Hints\r\nX-Pad: " + strings.Repeat("a", 64<<10) + "\r\n\r\n"
				for {
					if _, err := io.WriteString(c, hint); err != nil {
						return
					}
				}
			},
			client: getBody, want: "502", closes: true,
		},
		{
			name: "1xx flood",
			serve: func(c net.Conn, _ string) {
				for range flood {
					io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			},
			client: func(t *testing.T, e *env, target string) string {
				_, body, codes, _ := getTrace(t, e.front.URL+target)
				if body != "ok" || len(codes) == 0 || len(codes) >= flood {
					return fmt.Sprintf("%q after %d of %d 1xx", body, len(codes), flood)
				}
				return "bounded"
			},
			want: "bounded",
		},
		{
			name: "1xx to an HTTP/1.0 client",
			serve: func(c net.Conn, _ string) {
				io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			},
			client: func(t *testing.T, e *env, target string) string {
				c, err := net.Dial("tcp", strings.TrimPrefix(e.front.URL, "http://"))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				io.WriteString(c, "GET "+target+" HTTP/1.0\r\nHost: front\r\n\r\n")
				b, _ := io.ReadAll(c) // HTTP/1.0: the server closes after the answer
				first, _, _ := strings.Cut(string(b), "\r\n")
				return first
			},
			want: "HTTP/1.0 200 OK",
		},
		{
			name: "forbidden trailers",
			serve: func(c net.Conn, pad string) {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nTrailer: X-Sum, Set-Cookie\r\nTransfer-Encoding: chunked\r\n\r\n"+pad+chunk("ok")+
					"0\r\nX-Sum: 42\r\nSet-Cookie: s=1\r\nContent-Type: text/html\r\nSurrogate-Key: secret\r\n\r\n")
			},
			client: trailersOf, want: "X-Sum: 42",
		},
		{
			// Not announced: net/http sends it only under TrailerPrefix.
			name: "unannounced trailer",
			serve: func(c net.Conn, pad string) {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\n\r\n"+pad+chunk("ok")+
					"0\r\nX-Sum: 42\r\nX-Late: 7\r\nAuthorization: Basic eDp5\r\nContent-Length: 2\r\n\r\n")
			},
			client: trailersOf, want: "X-Late: 7; X-Sum: 42",
		},
		{
			// A field Connection names is hop-by-hop (RFC 9110 §7.6.1):
			// dropped from the trailers as from the header, announced
			// or not.
			name: "trailers Connection names",
			serve: func(c net.Conn, pad string) {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: X-Hop, x-late-hop\r\nConnection: keep-alive\r\nTrailer: X-Sum, X-Hop\r\nTransfer-Encoding: chunked\r\n\r\n"+pad+chunk("ok")+
					"0\r\nX-Sum: 42\r\nX-Hop: h\r\nX-Late-Hop: l\r\nX-Late: 7\r\n\r\n")
			},
			client: trailersOf, want: "X-Late: 7; X-Sum: 42",
		},
		{
			name: "client leaves mid-body",
			serve: func(c net.Conn, pad string) {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"+pad+chunk("hello"))
				// and stalls: the sidecar must close this connection
			},
			client: func(t *testing.T, e *env, target string) string {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, "GET", e.front.URL+target, nil)
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				// The header has left: the body is under way, and stalls.
				if _, err := resp.Body.Read(make([]byte, 1)); err != nil {
					return "no body: " + err.Error()
				}
				return "left"
			},
			want: "left", closes: true,
		},
	}
	for _, p := range edgePaths {
		for _, row := range rows {
			t.Run(p.name+"/"+row.name, func(t *testing.T) {
				pad := ""
				if p.pad > 0 {
					pad = chunk(strings.Repeat("p", p.pad))
					if strings.Contains(row.name, "Content-Length") {
						pad = strings.Repeat("p", p.pad)
					}
				}
				up := newRawUp(t, func(c net.Conn) { row.serve(c, pad) })
				e := newEnvURL(t, nil, up.url, []testRoute{clientRoute}, append(p.opts, withTagHeaders(true))...)
				if got := row.client(t, e, p.target); got != row.want {
					t.Errorf("got %q, want %q", got, row.want)
				}
				if row.closes {
					up.waitClosed(t, row.name)
				}
			})
		}
	}
}

// trailersOf is a GET through the sidecar: the trailers that arrived after
// the whole body, as "K: v" sorted and joined by "; ", or what went wrong.
func trailersOf(t *testing.T, e *env, target string) string {
	t.Helper()
	resp, err := client.Get(e.front.URL + target)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err != nil {
		return "broken: " + err.Error()
	}
	var got []string
	for k, vs := range resp.Trailer {
		got = append(got, k+": "+strings.Join(vs, ","))
	}
	sort.Strings(got)
	return strings.Join(got, "; ")
}

// getBody is a GET through the sidecar: its status when not 200, "broken"
// when the body could not be read whole, else "whole".
func getBody(t *testing.T, e *env, target string) string {
	t.Helper()
	resp, err := client.Get(e.front.URL + target)
	if err != nil {
		return "broken" // aborted before the header left
	}
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	switch {
	case resp.StatusCode != http.StatusOK:
		return fmt.Sprint(resp.StatusCode)
	case err != nil:
		return "broken"
	}
	return "whole"
}
