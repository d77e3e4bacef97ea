package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// edgeConfig: a cached route and pass-through for everything else, with
// the listener settings under test added to server:.
const edgeConfig = `
listen: 127.0.0.1:0
server:
%s
admin:
  listen: 127.0.0.1:0
  token: secret
upstream:
  url: %s
  timeout: 5s
%s
routes:
  - name: client
    path: /clients/{id:[1-9][0-9]*}
    ttl: 5m
`

// seen is an origin that records the last request's header and counts
// requests.
type seen struct {
	*httptest.Server
	mu    sync.Mutex
	last  http.Header
	calls atomic.Int64
}

func newSeen(t *testing.T) *seen {
	s := &seen{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		s.mu.Lock()
		s.last = r.Header.Clone()
		s.mu.Unlock()
		io.WriteString(w, "ok")
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *seen) header() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// rawExchange writes req on a new connection to the sidecar and reads
// until the sidecar closes it (the deadline is a hang guard: a connection
// kept open reads as "kept open"). It returns the status lines read.
func rawExchange(t *testing.T, addr, req string) (statuses []string, closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(addr, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			var ne net.Error
			timedOut := errors.As(err, &ne) && ne.Timeout()
			return statuses, !timedOut
		}
		statuses = append(statuses, resp.Status)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// RFC 9112 §6.1: a request with both Content-Length and Transfer-Encoding,
// or Transfer-Encoding in HTTP/1.0, is answered 400 and the connection
// closed, as NGINX does: a front proxy framing by Content-Length would
// read the bytes after the chunked body as its own next request's answer
// (response-queue poisoning). On the old code two answers came back on a
// kept-alive connection.
func TestAmbiguousFramingClosesConnection(t *testing.T) {
	up := newSeen(t)
	rep := startReplicaYAML(t, fmt.Sprintf(edgeConfig, "  read_timeout: 60s", up.URL, ""))
	for _, tc := range []struct{ name, req string }{
		{"Content-Length and Transfer-Encoding", "POST /other HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /other HTTP/1.1\r\nHost: a\r\n\r\n"},
		{"either case, Transfer-Encoding first", "POST /other HTTP/1.1\r\nHost: a\r\ntransfer-encoding: chunked\r\ncontent-length: 5\r\n\r\n0\r\n\r\nGET /other HTTP/1.1\r\nHost: a\r\n\r\n"},
		{"Transfer-Encoding on HTTP/1.0", "POST /other HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\nGET /other HTTP/1.1\r\nHost: a\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			statuses, closed := rawExchange(t, rep.proxy, tc.req)
			if len(statuses) != 1 || !strings.HasPrefix(statuses[0], "400") || !closed {
				t.Errorf("answers %q, closed %v; want one 400 and the connection closed", statuses, closed)
			}
		})
	}
	// A chunked request alone is framed well: answered, kept alive.
	statuses, _ := rawExchange(t, rep.proxy, "POST /other HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /other HTTP/1.1\r\nHost: a\r\n\r\n")
	if len(statuses) != 2 || statuses[0] != "200 OK" || statuses[1] != "200 OK" {
		t.Errorf("chunked alone: answers %q, want two 200s", statuses)
	}
}

// RFC 9110 §7.6.2: Max-Forwards: 0 on OPTIONS or TRACE makes the sidecar
// the final recipient; above 0 it is decremented on the way; TRACE is
// refused (405) unless server.allow_trace, since it reflects the client's
// credentials.
func TestMaxForwardsAndTrace(t *testing.T) {
	up := newSeen(t)
	rep := startReplicaYAML(t, fmt.Sprintf(edgeConfig, "  read_timeout: 60s", up.URL, ""))
	code, _, _ := rep.do(t, "OPTIONS", "/other", "Max-Forwards", "0")
	if code != http.StatusOK || up.calls.Load() != 0 {
		t.Errorf("OPTIONS Max-Forwards 0: %d, %d upstream calls; want 200 from the sidecar", code, up.calls.Load())
	}
	code, _, _ = rep.do(t, "OPTIONS", "/other", "Max-Forwards", "3")
	if got := up.header().Get("Max-Forwards"); code != http.StatusOK || got != "2" {
		t.Errorf("OPTIONS Max-Forwards 3: %d, upstream saw %q; want 2", code, got)
	}
	calls := up.calls.Load()
	code, _, _ = rep.do(t, "TRACE", "/other", "Authorization", "Bearer secret")
	if code != http.StatusMethodNotAllowed || up.calls.Load() != calls {
		t.Errorf("TRACE: %d, forwarded %v; want 405, not forwarded", code, up.calls.Load() != calls)
	}
	// Method names are case-sensitive (RFC 9110 §9.1), but a stack behind
	// may fold them: "trace" or "Trace" is refused as TRACE is.
	for _, m := range []string{"trace", "Trace", "tRACE"} {
		statuses, closed := rawExchange(t, rep.proxy, m+" /other HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer secret\r\n\r\n")
		if len(statuses) != 1 || !strings.HasPrefix(statuses[0], "405") || !closed || up.calls.Load() != calls {
			t.Errorf("%s: answered %q (closed %v), forwarded %v; want 405, closed, not forwarded", m, statuses, closed, up.calls.Load() != calls)
		}
	}

	rep = startReplicaYAML(t, fmt.Sprintf(edgeConfig, "  allow_trace: true", up.URL, ""))
	code, h, body := rep.do(t, "TRACE", "/other", "Max-Forwards", "0", "Authorization", "Bearer secret", "X-Mine", "m")
	if code != http.StatusOK || h.Get("Content-Type") != "message/http" || !strings.Contains(body, "X-Mine: m") || strings.Contains(body, "secret") {
		t.Errorf("allowed TRACE, Max-Forwards 0: %d %q %q; want the request reflected without credentials", code, h.Get("Content-Type"), body)
	}
}

// RFC 9110 §7.6.3: the sidecar adds its pseudonym to Via on what it
// forwards, and a request that already carries it came round a loop: 508
// at once, instead of a connection per round until file descriptors run out.
func TestViaLoopRefused(t *testing.T) {
	up := newSeen(t)
	for _, tc := range []struct{ server, via string }{
		{"  read_timeout: 60s", "1.1 sidecache"}, // the default pseudonym
		{"  via: edge-a", "1.1 front, 1.1 edge-a (sidecache)"},
	} {
		rep := startReplicaYAML(t, fmt.Sprintf(edgeConfig, tc.server, up.URL, ""))
		calls := up.calls.Load()
		code, _, _ := rep.do(t, "GET", "/other", "Via", tc.via)
		if code != http.StatusLoopDetected || up.calls.Load() != calls {
			t.Errorf("Via %q: %d, forwarded %v; want 508, not forwarded", tc.via, code, up.calls.Load() != calls)
		}
	}
	rep := startReplicaYAML(t, fmt.Sprintf(edgeConfig, "  via: edge-a", up.URL, ""))
	// Answers carry it too (RFC 9110 §7.6.3), on every path.
	for _, path := range []string{"/other", "/clients/2", "/clients/2"} {
		if _, h, _ := rep.do(t, "GET", path); strings.Join(h.Values("Via"), ", ") != "1.1 edge-a" {
			t.Errorf("%s: answer's Via %q, want ours", path, h.Values("Via"))
		}
	}
	rep.do(t, "GET", "/other", "Via", "1.0 front")
	if got := strings.Join(up.header().Values("Via"), ", "); got != "1.0 front, 1.1 edge-a" {
		t.Errorf("upstream saw Via %q, want the client's then ours", got)
	}
}

// Upgrades are tunnels the cache cannot see into: h2c is never forwarded
// (RFC 9113 §3.1), other protocols only when upstream.allow_upgrades names
// them; otherwise the request goes on without its Upgrade, as an ordinary
// one (RFC 9110 §7.8). On the old code an h2c upgrade was tunnelled.
func TestUpgradesOptIn(t *testing.T) {
	up := newSeen(t)
	h2c := []string{"Connection", "Upgrade, HTTP2-Settings", "Upgrade", "h2c", "HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA"}
	ws := []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13"}
	for _, tc := range []struct {
		name, allow string
		hdr         []string
		want        string // Upgrade the upstream sees
	}{
		{"h2c never", "", h2c, ""},
		{"h2c never, websocket allowed", "  allow_upgrades: [websocket]", h2c, ""},
		{"websocket not allowed", "", ws, ""},
		{"websocket allowed", "  allow_upgrades: [websocket]", ws, "websocket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := startReplicaYAML(t, fmt.Sprintf(edgeConfig, "  read_timeout: 60s", up.URL, tc.allow))
			rep.do(t, "GET", "/anything", tc.hdr...)
			h := up.header()
			if got := h.Get("Upgrade"); got != tc.want || (tc.want == "" && h.Get("Http2-Settings") != "") {
				t.Errorf("upstream saw Upgrade %q (HTTP2-Settings %q), want %q", got, h.Get("Http2-Settings"), tc.want)
			}
		})
	}
}

// A client that stops reading a long download does not pin the upstream
// request: past server.write_timeout without a write that made progress
// (NGINX send_timeout), the client's connection is closed and the
// upstream request cancelled. On the old code all 10 upstream requests of
// 10 such clients were still held at 75 s.
func TestStalledClientReleasesUpstream(t *testing.T) {
	ended := make(chan string, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		download(w, ended)
	}))
	t.Cleanup(up.Close)
	rep := startReplicaYAML(t, fmt.Sprintf(edgeConfig, "  write_timeout: 300ms", up.URL, ""))
	// A write's upstream request is detached from its client's
	// (internal/detached): POST checks it ends with the cut all the same.
	for _, path := range []string{"/download", "/clients/1", "POST /download"} {
		t.Run(path, func(t *testing.T) {
			c, err := net.Dial("tcp", strings.TrimPrefix(rep.proxy, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
			req := "GET " + path + " HTTP/1.1\r\nHost: a\r\n\r\n"
			if method, target, ok := strings.Cut(path, " "); ok {
				req = method + " " + target + " HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"
			}
			io.WriteString(c, req)
			// Never read. The upstream's request must end.
			select {
			case got := <-ended:
				if got != "cancelled" {
					t.Errorf("upstream %s", got)
				}
			case <-time.After(30 * time.Second): // hang guard
				t.Fatal("the upstream request is still held")
			}
		})
	}
}

// download writes 64 MiB in 64 KiB chunks and then says on ended whether
// the client took it whole or a write failed (the request was cancelled).
func download(w http.ResponseWriter, ended chan<- string) {
	chunk := make([]byte, 64<<10)
	for sent := 0; sent < 64<<20; sent += len(chunk) {
		if _, err := w.Write(chunk); err != nil {
			ended <- "cancelled"
			return
		}
	}
	ended <- "sent whole"
}
