package lean_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/lean"
)

// Only a plain-HTTP upstream gets a client; https and user info are for
// http.Transport.
func TestNew(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"http://up:8080", true},
		{"http://up", true},
		{"https://up", false},
		{"http://u:p@up", false},
	} {
		u, _ := url.Parse(tc.url)
		if got := lean.New(u, time.Second, 0, 0) != nil; got != tc.want {
			t.Errorf("New(%s) != nil: %v, want %v", tc.url, got, tc.want)
		}
	}
}

// Only replayable requests without a body, an upgrade or an Expect take
// the lean way (RFC 9110 §9.2.2: they may be sent twice).
func TestTakes(t *testing.T) {
	cl := lean.New(&url.URL{Scheme: "http", Host: "up"}, time.Second, 0, 0)
	for _, tc := range []struct {
		name string
		r    func() *http.Request
		want bool
	}{
		{"GET", func() *http.Request { return httptest.NewRequest("GET", "/", nil) }, true},
		{"HEAD", func() *http.Request { return httptest.NewRequest("HEAD", "/", nil) }, true},
		{"OPTIONS", func() *http.Request { return httptest.NewRequest("OPTIONS", "/", nil) }, true},
		{"TRACE", func() *http.Request { return httptest.NewRequest("TRACE", "/", nil) }, true},
		{"POST", func() *http.Request { return httptest.NewRequest("POST", "/", nil) }, false},
		{"DELETE", func() *http.Request { return httptest.NewRequest("DELETE", "/", nil) }, false},
		{"GET with a body", func() *http.Request { return httptest.NewRequest("GET", "/", strings.NewReader("b")) }, false},
		{"GET chunked", func() *http.Request {
			r := httptest.NewRequest("GET", "/", nil)
			r.TransferEncoding = []string{"chunked"}
			return r
		}, false},
		{"Upgrade", func() *http.Request {
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("Upgrade", "websocket")
			return r
		}, false},
		{"Expect", func() *http.Request {
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("Expect", "100-continue")
			return r
		}, true}, // not sent: nothing to wait for (TestRequestWriting)
		{"OPTIONS *", func() *http.Request {
			r := httptest.NewRequest("OPTIONS", "/", nil)
			r.RequestURI = "*"
			return r
		}, false},
	} {
		if got := cl.Takes(tc.r()); got != tc.want {
			t.Errorf("%s: Takes %v, want %v", tc.name, got, tc.want)
		}
	}
	if (*lean.Client)(nil).Takes(httptest.NewRequest("GET", "/", nil)) {
		t.Error("a nil client takes a request")
	}
}

// What RoundTrip makes of the upstream's answer: 1xx answers handed over
// in order before the final one (RFC 9110 §15.2), hop-by-hop fields
// removed from the final one (RFC 9110 §7.6.1), a 101 on a request that
// did not ask to upgrade refused.
func TestRoundTripAnswers(t *testing.T) {
	tests := []struct {
		name    string
		reply   string
		interim []string // code Link
		header  http.Header
		err     bool
	}{
		{
			name:   "hop-by-hop fields removed",
			reply:  "HTTP/1.1 200 OK\r\nConnection: X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nX-End: e\r\nContent-Length: 2\r\n\r\nok",
			header: http.Header{"X-End": {"e"}, "X-Hop": nil, "Keep-Alive": nil, "Connection": nil},
		},
		{
			name: "1xx handed over in order",
			reply: "HTTP/1.1 100 Continue\r\n\r\n" +
				"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n" +
				"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
			interim: []string{"100 ", "103 </a.css>; rel=preload"},
			header:  http.Header{"Link": nil},
		},
		{
			name:  "101 unasked refused",
			reply: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
			err:   true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cl, _ := rawUpstream(t, 5*time.Second, 0, func(_ int, c net.Conn, br *bufio.Reader) {
				answer(c, br, tc.reply, 1)
			})
			var interim []string
			r := httptest.NewRequest("GET", "/", nil)
			resp, c, err := cl.RoundTrip(r.Context(), r, func(code int, h http.Header) {
				interim = append(interim, strconv.Itoa(code)+" "+h.Get("Link"))
			})
			if (err != nil) != tc.err {
				t.Fatalf("err %v, want error %v", err, tc.err)
			}
			if err != nil {
				return
			}
			defer c.Close()
			if strings.Join(interim, "|") != strings.Join(tc.interim, "|") {
				t.Errorf("1xx %q, want %q", interim, tc.interim)
			}
			for k, want := range tc.header {
				if vs, ok := resp.Header[k]; want == nil && ok || want != nil && strings.Join(vs, ",") != strings.Join(want, ",") {
					t.Errorf("%s: %q, want %q", k, vs, want)
				}
			}
		})
	}
}

// The wait for the answer's header ends at the timeout, or when the
// client leaves; either way the connection is closed, so the upstream
// sees the request end, as with ReverseProxy.
func TestRoundTripWaitEnds(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		cancel  bool
		want    func(error) bool
	}{
		{"response-header timeout", 50 * time.Millisecond, false, func(err error) bool {
			var te interface{ Timeout() bool }
			return errors.As(err, &te) && te.Timeout()
		}},
		{"client left", 10 * time.Second, true, func(err error) bool { return errors.Is(err, context.Canceled) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			asked, ended := make(chan struct{}), make(chan struct{})
			cl, _ := rawUpstream(t, tc.timeout, 0, func(_ int, c net.Conn, br *bufio.Reader) {
				http.ReadRequest(br)
				close(asked)
				io.Copy(io.Discard, br) // until the client closes
				close(ended)
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				go func() { <-asked; cancel() }()
			}
			r := httptest.NewRequest("GET", "/", nil)
			_, _, err := cl.RoundTrip(ctx, r, nil)
			if !tc.want(err) {
				t.Errorf("err %v", err)
			}
			<-ended // hangs if the connection were left open
		})
	}
}

// The pool keeps at most maxIdle connections, and none after CloseIdle.
func TestPoolBounds(t *testing.T) {
	cl, conns := rawUpstream(t, 5*time.Second, 1, func(_ int, c net.Conn, br *bufio.Reader) { answer(c, br, ok, -1) })
	r := httptest.NewRequest("GET", "/", nil)
	both := func() {
		var cs []*lean.Conn
		for range 2 { // held together: the second cannot reuse the first
			resp, c, err := cl.RoundTrip(r.Context(), r, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			cs = append(cs, c)
		}
		for _, c := range cs {
			cl.Put(c)
		}
	}
	both() // 2 dialled, 1 kept
	both() // 1 reused, 1 dialled
	if n := conns.Load(); n != 3 {
		t.Errorf("after two pairs, %d connections, want 3 (one kept idle)", n)
	}
	cl.CloseIdle()
	for range 2 {
		if _, err := get(cl); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 5 {
		t.Errorf("after CloseIdle, %d connections, want 5 (none kept)", n)
	}
}

// The request's write and the answer's reads go through internal/rawio's
// raw calls (Linux): a pass-through enters no syscall.Syscall on the
// upstream socket (rawio's doc).
func TestConnIsRaw(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("raw calls are Linux's")
	}
	cl, _ := rawUpstream(t, 5*time.Second, 0, func(_ int, c net.Conn, br *bufio.Reader) { answer(c, br, ok, -1) })
	r := httptest.NewRequest("GET", "/", nil)
	resp, c, err := cl.RoundTrip(r.Context(), r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "ok" {
		t.Fatalf("body %q, %v", b, err)
	}
	if rd, wr := lean.RawCalls(c); rd == 0 || wr == 0 {
		t.Errorf("%d raw reads, %d raw writes; want both > 0", rd, wr)
	}
	cl.Put(c)
}
