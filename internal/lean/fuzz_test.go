package lean_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/lean"
)

// outcome is what a proxy makes of an upstream's bytes: a 502 (the round
// trip or the body failed), or the status, body and whether the
// connection may be kept.
type outcome struct {
	bad    bool
	status int
	body   string
	close  bool
}

// serveOnce is an upstream on a real socket whose first connection gets
// data in answer to its first request, then its write side shut (so an
// answer that never ends ends now, without a timeout); every later
// connection is answered "ok". It counts connections.
func serveOnce(t *testing.T, data []byte) (*url.URL, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var conns atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := conns.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				if n == 1 {
					if _, err := http.ReadRequest(br); err != nil {
						return
					}
					c.Write(data)
					c.(*net.TCPConn).CloseWrite()
					io.Copy(io.Discard, c)
					return
				}
				answer(c, br, ok, -1)
			}()
		}
	}()
	return &url.URL{Scheme: "http", Host: ln.Addr().String()}, &conns
}

func leanOutcome(t *testing.T, data []byte) (outcome, *lean.Client) {
	u, _ := serveOnce(t, data)
	cl := lean.New(u, 5*time.Second, 0, 0)
	t.Cleanup(cl.CloseIdle)
	r, _ := http.NewRequest("GET", "http://front/x", nil)
	r.RemoteAddr = "192.0.2.1:1234"
	resp, c, err := cl.RoundTrip(context.Background(), r, nil)
	if err != nil {
		return outcome{bad: true}, cl
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.Close()
		return outcome{bad: true}, cl
	}
	cl.Put(c)
	return outcome{status: resp.StatusCode, body: string(b), close: resp.Close}, cl
}

// transportOutcome is the same exchange through net/http's Transport, as
// the proxy's ReverseProxy path judges it: a status below 100 or an
// unasked 101 is a 502 there too.
func transportOutcome(t *testing.T, data []byte) outcome {
	u, _ := serveOnce(t, data)
	tr := &http.Transport{DisableCompression: true, ResponseHeaderTimeout: 5 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	r, _ := http.NewRequest("GET", u.String()+"/x", nil)
	resp, err := tr.RoundTrip(r)
	if err != nil {
		return outcome{bad: true}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 100 || resp.StatusCode == http.StatusSwitchingProtocols {
		return outcome{bad: true}
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return outcome{bad: true}
	}
	return outcome{status: resp.StatusCode, body: string(b), close: resp.Close}
}

// FuzzReadResponse feeds random bytes from a real upstream socket to the
// lean client's response reading (issue 21): never a panic; the same
// 502 / status, body / keep-or-close decision as net/http's Transport on
// the same bytes; and never a pooled connection in an unknown state — the
// next request on the client always gets the next upstream's own answer,
// never bytes left over from the first.
func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		ok,
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
		"HTTP/1.1 099 Nope\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nuntil close",
		"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"garbage",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, cl := leanOutcome(t, data)
		want := transportOutcome(t, data)
		if got != want {
			t.Errorf("lean %+v, Transport %+v", got, want)
		}
		// The pool: whatever the first answer left behind, the next
		// request reads the next answer.
		if body, err := get(cl); body != "ok" || err != nil {
			t.Errorf("next request: %q, %v; want the upstream's own ok", body, err)
		}
	})
}
