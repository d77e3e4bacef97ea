package lean_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/lean"
)

// WriteResponse relays an answer as ReverseProxy does, through a real
// server to a real client: trailers, announced or not (RFC 9110 §6.5),
// streams flushed as they come, an answer of known length flushed before
// a read that waits on the upstream, and a body broken upstream seen broken by
// the client, never as a short answer that looks whole.
func TestWriteResponse(t *testing.T) {
	tests := []struct {
		name    string
		head    string // sent first
		rest    string // sent once the client has read first
		first   string // what the client must read before rest is sent
		body    string
		trailer http.Header
		broken  bool
	}{
		{
			name: "announced trailers",
			head: "HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\nX-Sum: 42\r\n\r\n",
			body: "body", trailer: http.Header{"X-Sum": {"42"}},
		},
		{
			name: "unannounced trailers",
			head: "HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\nX-Sum: 42\r\nX-Late: 1\r\n\r\n",
			body: "body", trailer: http.Header{"X-Sum": {"42"}, "X-Late": {"1"}},
		},
		{
			// RFC 9110 §6.5.1: framing, auth, cookies, Content-* never
			// come as trailers, announced or not.
			name: "forbidden trailers dropped",
			head: "HTTP/1.1 200 OK\r\nTrailer: X-Sum, Set-Cookie\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\nX-Sum: 42\r\nSet-Cookie: s=1\r\nContent-Type: text/html\r\nLocation: /x\r\n\r\n",
			body: "body", trailer: http.Header{"X-Sum": {"42"}, "Set-Cookie": nil, "Content-Type": nil, "Location": nil},
		},
		{
			name:  "unknown length streamed",
			head:  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nfirst;\r\n",
			rest:  "6\r\nsecond\r\n0\r\n\r\n",
			first: "first;", body: "first;second",
		},
		{
			name:  "event stream of known length streamed",
			head:  "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nContent-Length: 12\r\n\r\nfirst;",
			rest:  "second",
			first: "first;", body: "first;second",
		},
		{
			// What came is the client's while the upstream holds the
			// rest: flushed before the read that waits for it.
			name:  "known length, rest held upstream",
			head:  "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\nfirst;",
			rest:  "second",
			first: "first;", body: "first;second",
		},
		{
			name:   "body broken upstream",
			head:   "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
			broken: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			cl, _ := rawUpstream(t, 5*time.Second, 0, func(_ int, c net.Conn, br *bufio.Reader) {
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				io.WriteString(c, tc.head)
				if tc.first != "" {
					<-release
					io.WriteString(c, tc.rest)
				}
				if !tc.broken {
					answer(c, br, ok, -1)
				}
			})
			front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				resp, c, err := cl.RoundTrip(r.Context(), r, nil)
				if err != nil {
					w.WriteHeader(http.StatusBadGateway)
					return
				}
				if err := lean.WriteResponse(w, resp, c, make([]byte, 32<<10), httpcache.RemoveForbiddenTrailers); err != nil {
					c.Close()
					panic(http.ErrAbortHandler)
				}
				cl.Put(c)
			}))
			t.Cleanup(front.Close)
			// The client reads the header and the first part while the
			// upstream holds the rest back.
			var resp *http.Response
			got := make([]byte, len(tc.first))
			read := make(chan error, 1)
			go func() {
				var err error
				if resp, err = front.Client().Get(front.URL); err == nil {
					_, err = io.ReadFull(resp.Body, got)
				}
				read <- err
			}()
			var err error
			select {
			case err = <-read:
				close(release)
			case <-time.After(5 * time.Second): // a hang guard, not a timing
				close(release)
				<-read
				t.Fatalf("first part %q not streamed before the upstream finished", tc.first)
			}
			if tc.broken && err != nil {
				return // aborted before the header left: broken too
			}
			if err != nil || string(got) != tc.first {
				t.Fatalf("first part %q, %v; want %q", got, err, tc.first)
			}
			defer resp.Body.Close()
			rest, err := io.ReadAll(resp.Body)
			if tc.broken {
				if err == nil {
					t.Errorf("body %q read whole, want a broken answer", rest)
				}
				return
			}
			if err != nil || string(got)+string(rest) != tc.body {
				t.Errorf("body %q, %v; want %q", string(got)+string(rest), err, tc.body)
			}
			for k, want := range tc.trailer {
				if want == nil {
					if v, ok := resp.Trailer[k]; ok {
						t.Errorf("forbidden trailer %s relayed: %q", k, v)
					}
					continue
				}
				if v := resp.Trailer.Get(k); v != want[0] {
					t.Errorf("trailer %s %q, want %q (trailers %v)", k, v, want[0], resp.Trailer)
				}
			}
		})
	}
}
