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

// An answer of known length that the upstream stops sending after its
// header (or a first few bytes of its body) reaches the client as far as
// it came, on every path that relays it as it comes: the status line,
// the header and the bytes read are the client's while the upstream
// stalls, as NGINX with proxy_buffering off and Varnish's streaming give
// them — not held in the sidecar's write buffer until the upstream timeout
// cuts the connection and the client is left with nothing, not even a
// status. A Content-Length answer was flushed only on the large-body
// stream (lean.StreamBody); the lean pass-through and ReverseProxy's wrote
// its header into net/http's buffer and waited on the upstream's next
// byte. (The cached path's fill of an answer that fits reads it whole
// before anyone is answered: it is to be stored and shared, and a body cut
// short is a 502, not a broken answer.)
//
// The upstream holds until the client has read the status line and what
// the body sent (an order, not a timing); then it closes short of its
// Content-Length, and the client sees a cut connection, never a whole body.
func TestStalledAnswerReachesClientAsItCame(t *testing.T) {
	cases := []struct {
		name   string
		method string
		target string
		length int
		sent   string
		opts   []envOpt
	}{
		{"lean pass-through, header alone", "GET", "/other", 100, "", nil},
		{"lean pass-through, 8 bytes", "GET", "/other", 100, "12345678", nil},
		{"ReverseProxy pass-through, header alone", "GET", "/other", 100, "", []envOpt{withTransport}},
		{"ReverseProxy pass-through, 8 bytes", "GET", "/other", 100, "12345678", []envOpt{withTransport}},
		{"write (ReverseProxy), 8 bytes", "PATCH", "/other", 100, "12345678", nil},
		// Over max_body_bytes (1 MiB in newEnv): the cached path streams it
		// (lean.StreamBody), as NGINX with proxy_buffering off does.
		{"large body, lean fill, header alone", "GET", "/clients/1", 1<<20 + 100_000, "", nil},
		{"large body, lean fill, 8 bytes", "GET", "/clients/1", 1<<20 + 100_000, "12345678", nil},
		{"large body, Transport fill, 8 bytes", "GET", "/clients/1", 1<<20 + 100_000, "12345678", []envOpt{withTransport}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
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
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n%s", tc.length, tc.sent)
				held(t, release)
				c.Close() // short of the Content-Length: a broken answer
			})
			e := newEnvURL(t, nil, up.url, []testRoute{clientRoute}, append(tc.opts, withMaxHeader)...)
			c, err := net.Dial("tcp", strings.TrimPrefix(e.front.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			framing := "" // a bodiless GET: the lean loop's
			if tc.method != "GET" {
				framing = "Content-Length: 0\r\n"
			}
			fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: sidecar\r\n%s\r\n", tc.method, tc.target, framing)
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
				b := make([]byte, len(tc.sent))
				_, h.err = io.ReadFull(br, b)
				h.body = string(b)
			}()
			select {
			case h := <-got:
				if h.err != nil || !strings.HasPrefix(h.status, "HTTP/1.1 200 ") || h.body != tc.sent {
					t.Errorf("while the upstream stalls the client read %q and %q (%v); want the 200 and %q", h.status, h.body, h.err, tc.sent)
				}
			case <-time.After(10 * time.Second): // a hang guard, not a measurement
				t.Errorf("the client has read neither the status line nor the %d bytes the upstream sent while it stalls: held in a write buffer", len(tc.sent))
				free()
				<-got
			}
			free()
			rest, _ := io.ReadAll(br)
			if n := len(tc.sent) + len(rest); n >= tc.length {
				t.Errorf("the client read %d bytes of a body the upstream broke off at %d", n, len(tc.sent))
			}
		})
	}
}
