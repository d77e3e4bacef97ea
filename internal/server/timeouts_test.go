package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// timeoutConfig gives both listeners a 1 s read_timeout and a 4 KiB header
// limit; POST /clients/{id} is a write route and anything else passes
// through.
const timeoutConfig = `
listen: 127.0.0.1:0
server:
  read_timeout: 1s
  max_header_bytes: 4KiB
admin:
  listen: 127.0.0.1:0
  token: secret
upstream:
  url: %s
  timeout: 60s
routes:
  - name: client
    path: /clients/{id:[1-9][0-9]*}
    ttl: 5m
    tags: ["client:{id}"]
  - name: client-write
    methods: [POST]
    path: /clients/{id:[1-9][0-9]*}
    invalidate: ["client:{id}"]
`

// A POST whose body arrives at one byte every 3 s is cut at read_timeout,
// and the upstream request it feeds is cancelled: the upstream sees its
// body end in an error, never the whole of it. Without the timeout the
// client held the upstream request for as long as it trickled.
func TestSlowBodyIsCutAndUpstreamCancelled(t *testing.T) {
	for _, path := range []string{"/clients/7", "/elsewhere"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			got := make(chan string, 1)
			origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, err := io.ReadAll(r.Body)
				if err != nil {
					got <- fmt.Sprintf("cancelled after %d bytes: %v", len(b), err)
					return
				}
				got <- "whole body: " + string(b)
			}))
			t.Cleanup(origin.Close)
			rep := startReplicaYAML(t, fmt.Sprintf(timeoutConfig, origin.URL))

			const body = "0123456789" // 30 s at one byte every 3 s
			conn, err := net.Dial("tcp", strings.TrimPrefix(rep.proxy, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: clients.svc\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n", path, len(body))
			go func() {
				for i := range len(body) {
					if _, err := conn.Write([]byte{body[i]}); err != nil {
						return
					}
					time.Sleep(3 * time.Second)
				}
			}()
			select {
			case res := <-got:
				if !strings.HasPrefix(res, "cancelled") {
					t.Fatalf("upstream: %s; want its request cancelled at read_timeout", res)
				}
				t.Logf("upstream: %s", res)
			case <-time.After(2 * time.Minute):
				t.Fatal("upstream request still open after 2 minutes")
			}
		})
	}
}

// A header block over max_header_bytes is refused with 431 on both
// listeners.
func TestOversizedHeaderBlockRefusedOnBothListeners(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(origin.Close)
	rep := startReplicaYAML(t, fmt.Sprintf(timeoutConfig, origin.URL))
	for _, base := range []string{rep.proxy, rep.admin} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: clients.svc\r\nX-Big: %s\r\n\r\n", strings.Repeat("x", 16<<10))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			conn.Close()
			t.Fatalf("%s: %v", base, err)
		}
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("%s: 16 KiB header answered %d, want 431", base, resp.StatusCode)
		}
	}
}
