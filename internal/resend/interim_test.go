package resend_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sidecache/sidecache/internal/resend"
)

// An upstream that sends 103 Early Hints and then closes got the request,
// so the resend a reused connection allows (RFC 9112 §9.3.1) is not for
// it, and would relay the 103 twice (RFC 9110 §15.2): lean does not
// resend then (its Conn.interim). http.Transport does not either — the
// read of a 1xx is an answer begun, not a connection found closed — and
// this pins it, with Once around it, for ReverseProxy's path and the
// fill's when it takes the Transport: one 1xx to the caller's hook, one
// request at the upstream.
func TestNoResendAfterInterim(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int64
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if requests.Add(1) == 1 {
						_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
						continue
					}
					_ = r
					_, _ = io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
					return
				}
			})
		}
	})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	rt := resend.Once(tr)
	url := "http://" + ln.Addr().String() + "/"
	if _, err := get(rt, url); err != nil {
		t.Fatal(err) // leaves one idle connection
	}
	var hints atomic.Int64
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		Got1xxResponse: func(int, textproto.MIMEHeader) error { hints.Add(1); return nil },
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := rt.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("answered %d, want the failure", resp.StatusCode)
	}
	if hints.Load() != 1 || requests.Load() != 2 {
		t.Errorf("%d 1xx seen, %d requests at the upstream (%v); want one 103 from one request", hints.Load(), requests.Load(), err)
	}
}
