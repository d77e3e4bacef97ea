package lean_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/lean"
)

// BenchmarkSendBulk is the bulk call's round trip as the proxy makes it
// (lean.Send, then the body read whole and closed) against a bare TCP
// upstream that answers every request with one canned 20 KB answer: the
// client's own cost per call, with no net/http server in the figures.
func BenchmarkSendBulk(b *testing.B) {
	body := strings.Repeat("x", 20<<10)
	answer := fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nCache-Control: max-age=300\r\nDate: %s\r\nContent-Length: %d\r\n\r\n%s",
		time.Now().UTC().Format(http.TimeFormat), len(body), body)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					// One request: lines up to the empty one.
					for {
						line, err := br.ReadSlice('\n')
						if err != nil {
							return
						}
						if len(bytes.TrimSpace(line)) == 0 {
							break
						}
					}
					if _, err := c.Write(answer); err != nil {
						return
					}
				}
			}()
		}
	}()
	u := &url.URL{Scheme: "http", Host: ln.Addr().String()}
	cl := lean.New(u, 5*time.Second, 0, 0)
	ctx := context.Background()
	buf := make([]byte, 0, 32<<10)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		out := (&http.Request{Method: http.MethodGet, URL: &url.URL{Scheme: "http", Host: u.Host, Path: "/users", RawQuery: "ids=1,2,3"},
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Accept": {"application/json"}, "User-Agent": {""}, "X-Request-Id": {"abc"}}}).WithContext(cctx)
		resp, err := cl.Send(out, nil)
		if err != nil {
			b.Fatal(err)
		}
		buf = buf[:0]
		for {
			n, err := resp.Body.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		resp.Body.Close()
		cancel()
		if len(buf) != len(body) {
			b.Fatalf("read %d bytes, want %d", len(buf), len(body))
		}
	}
}
