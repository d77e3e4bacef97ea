package proxy_test

import (
	"bufio"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
)

// An upstream that writes more than the answer it announced (a body past
// Content-Length, a body on a 204 or a HEAD) must not have those bytes read
// as the answer to the next request on the same connection: that would hand
// one client's response to another. net/http's transport drops such a
// connection; the lean pass-through loop must too. Here the surplus is a
// whole response ("secret"), the worst case.
func TestPassThroughSurplusBytesNeverAnswerTheNextRequest(t *testing.T) {
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
			conns.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					req.Body.Close()
					_, err = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" +
						"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret"))
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	e := newEnvURL(t, &upstream{}, "http://"+ln.Addr().String(), []testRoute{clientRoute})
	for i := range 4 {
		r, body := e.get("/other")
		if r.StatusCode != http.StatusOK || body != "ok" {
			t.Fatalf("request %d: %d %q, want 200 \"ok\" (the surplus of an earlier answer was served)", i+1, r.StatusCode, body)
		}
	}
	if n := conns.Load(); n != 4 {
		t.Errorf("upstream connections = %d, want 4 (none reused after a surplus)", n)
	}
}

// The same when the surplus arrives after the answer, while the connection
// sits idle: it is noticed before the connection is reused.
func TestPassThroughLateSurplusDropsTheConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	answered, surplus := make(chan struct{}), make(chan struct{})
	var conns atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			first := conns.Add(1) == 1
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					req.Body.Close()
					if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")); err != nil {
						return
					}
					if first {
						first = false
						<-answered
						_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret"))
						close(surplus)
					}
				}
			}()
		}
	}()
	e := newEnvURL(t, &upstream{}, "http://"+ln.Addr().String(), []testRoute{clientRoute})
	if r, body := e.get("/other"); r.StatusCode != http.StatusOK || body != "ok" {
		t.Fatalf("first: %d %q", r.StatusCode, body)
	}
	close(answered)
	<-surplus // written on loopback: in the sidecar's socket buffer now
	if r, body := e.get("/other"); r.StatusCode != http.StatusOK || body != "ok" {
		t.Fatalf("second: %d %q, want 200 \"ok\" (the late surplus was served)", r.StatusCode, body)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("upstream connections = %d, want 2", n)
	}
}
