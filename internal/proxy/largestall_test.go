package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// A large answer the cached path streams (its Content-Length is over
// max_body_bytes) reaches the client as it comes, even though its length
// is known: once the sidecar has committed to streaming, the status line,
// the header and every body byte it has read are flushed, as NGINX does
// with proxy_buffering off and Varnish does when it streams. On the old
// code a Content-Length answer was not flushed per read, so an upstream
// that sent 8 bytes and stalled left the client with nothing — not even
// the status line — until the upstream timeout cut the connection.
//
// The upstream holds until the client has read the status line and the 8
// bytes (an order, not a timing); then it closes short of its
// Content-Length, and the client sees a cut connection, never a whole body.
func TestLargeStreamFlushesWhileUpstreamStalls(t *testing.T) {
	const length = 1<<20 + 100_000 // over MaxBodyBytes (1 MiB in newEnv)
	const sent = "12345678"
	release := make(chan struct{})
	released := false
	free := func() {
		if !released {
			released = true
			close(release)
		}
	}
	defer free()
	up := newRawUp(t, func(c net.Conn) {
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n%s", length, sent)
		held(t, release)
		c.Close() // short of the Content-Length: a broken answer
	})
	e := newEnvURL(t, nil, up.url, []testRoute{clientRoute}, withMaxHeader)
	c, err := net.Dial("tcp", strings.TrimPrefix(e.front.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /clients/1 HTTP/1.1\r\nHost: sidecar\r\n\r\n")
	br := bufio.NewReader(c)
	type head struct {
		status, body string
		err          error
	}
	got := make(chan head, 1)
	go func() {
		var h head
		defer func() { got <- h }()
		if h.status, h.err = br.ReadString('\n'); h.err != nil {
			return
		}
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				h.err = err
				return
			}
			if line == "\r\n" {
				break
			}
		}
		b := make([]byte, len(sent))
		_, h.err = io.ReadFull(br, b)
		h.body = string(b)
	}()
	select {
	case h := <-got:
		if h.err != nil || !strings.HasPrefix(h.status, "HTTP/1.1 200 ") || h.body != sent {
			t.Errorf("while the upstream stalls the client read %q and %q (%v); want the 200 and %q", h.status, h.body, h.err, sent)
		}
	case <-time.After(10 * time.Second): // a hang guard, not a measurement
		t.Errorf("the client has read neither the status line nor the %d bytes while the upstream stalls: held in a write buffer", len(sent))
		free()
		<-got
	}
	free()
	rest, _ := io.ReadAll(br)
	if n := len(sent) + len(rest); n >= length {
		t.Errorf("the client read %d bytes of a body the upstream broke off at %d", n, len(sent))
	}
}
