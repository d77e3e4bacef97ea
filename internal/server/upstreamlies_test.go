package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// liar is a raw-socket upstream whose answers break HTTP as mode says:
//
//   - "ok": a well-framed 200 (a JSON list for a bulk call);
//   - "304": 304 Not Modified, whatever the request asked;
//   - "clte": a 200 with Content-Length and Transfer-Encoding: chunked;
//   - "early": 103 Early Hints, then the connection closed.
//
// It records each request by connection, so a test can see whether a
// connection was used again.
type liar struct {
	ln    net.Listener
	mode  atomic.Value // string
	mu    sync.Mutex
	calls []liarCall
	conns atomic.Int64
	open  []net.Conn // closed at cleanup: the sidecar's pools keep theirs
	wg    sync.WaitGroup
}

type liarCall struct {
	conn int64
	mode string
	uri  string
}

func newLiar(t *testing.T) *liar {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &liar{ln: ln}
	l.mode.Store("ok")
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.mu.Lock()
			l.open = append(l.open, c)
			l.mu.Unlock()
			l.wg.Add(1)
			go func() { defer l.wg.Done(); l.serve(c, l.conns.Add(1)) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		l.mu.Lock()
		for _, c := range l.open {
			c.Close()
		}
		l.mu.Unlock()
		l.wg.Wait()
	})
	return l
}

func (l *liar) URL() string { return "http://" + l.ln.Addr().String() }

func (l *liar) set(mode string) { l.mode.Store(mode) }

func (l *liar) serve(c net.Conn, id int64) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		r, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		mode := l.mode.Load().(string)
		l.mu.Lock()
		l.calls = append(l.calls, liarCall{conn: id, mode: mode, uri: r.URL.RequestURI()})
		l.mu.Unlock()
		body := "ok"
		if ids := r.URL.Query().Get("ids"); r.URL.Path == "/users" && ids != "" {
			var el []string
			for _, id := range strings.Split(ids, ",") {
				el = append(el, fmt.Sprintf(`{"id":%q}`, id))
			}
			body = "[" + strings.Join(el, ",") + "]"
		}
		var out string
		switch mode {
		case "304":
			out = "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nCache-Control: max-age=60\r\n\r\n"
		case "clte":
			out = fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nCache-Control: max-age=60\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(body), body)
		case "early":
			_, _ = io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
			return
		default:
			out = fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nCache-Control: max-age=60\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		}
		if _, err := io.WriteString(c, out); err != nil {
			return
		}
	}
}

// after reports whether any request came, after the first call in mode,
// on that call's connection.
func (l *liar) reusedAfter(mode string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	conn := int64(-1)
	for _, c := range l.calls {
		switch {
		case conn < 0 && c.mode == mode:
			conn = c.conn
		case conn >= 0 && c.conn == conn:
			return true
		}
	}
	return false
}

const liarConfig = `
listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
  token: secret
upstream:
  url: %s
  timeout: 5s
cache:
  max_body_bytes: 64KiB
  l1:
    max_bytes: 16MiB
routes:
  - name: page
    path: /p/{id}
    ttl: 5m
  - name: user
    path: /users/{id}
    ttl: 5m
    batch:
      path: /users
      param: ids
      max_size: 10
      max_wait: 1ms
      id_field: id
  - name: users
    path: /users
    split:
      param: ids
      route: user
`

// liarPaths are the sidecar's paths to the upstream: lean and
// ReverseProxy pass-through, the cached fill, a batch route's bulk call
// (one id, and a split list).
var liarPaths = []struct{ name, method, path string }{
	{"lean pass-through", "GET", "/other/%d"},
	{"ReverseProxy pass-through", "POST", "/other/%d"},
	{"cached fill", "GET", "/p/%d"},
	{"batch", "GET", "/users/%d"},
	{"split", "GET", "/users?ids=%d,1%[1]d"},
}

// A 304 answers a conditional GET or HEAD only (RFC 9110 §15.4.5): to a
// request with no condition — the client sent none, or the cached path
// took the client's away and sent none of its own — it is an upstream
// failure, answered 502 and counted so, never relayed or stored (as
// Varnish). A 304 to a client's own condition is still relayed. On the old
// code the pass-through and the cached fill relayed the bodiless 304.
func TestUnconditional304IsUpstreamError(t *testing.T) {
	up := newLiar(t)
	rep := startReplicaYAML(t, fmt.Sprintf(liarConfig, up.URL()))
	up.set("304")
	for i, tc := range liarPaths {
		t.Run(tc.name, func(t *testing.T) {
			errs := metric(t, rep, "sidecache_upstream_requests_total", `code="error"`)
			path := fmt.Sprintf(tc.path, 100+i)
			if code, _, _ := rep.do(t, tc.method, path); code != http.StatusBadGateway {
				t.Errorf("%s %s: %d, want 502", tc.method, path, code)
			}
			if n := metric(t, rep, "sidecache_upstream_requests_total", `code="error"`); n <= errs {
				t.Errorf("upstream errors %v -> %v, want it counted", errs, n)
			}
		})
	}
	// The client's own condition: its copy is good, the 304 is its.
	for _, path := range []string{"/other/1", "/other/2"} {
		code, _, _ := rep.do(t, "GET", path, "If-None-Match", `"x"`)
		if code != http.StatusNotModified {
			t.Errorf("conditional GET %s: %d, want the upstream's 304", path, code)
		}
	}
}

// RFC 9112 §6.3: an answer with both Content-Length and Transfer-Encoding
// "ought to be handled as an error" (response splitting, smuggling); it
// is answered 502 on every path, never stored, and its connection is
// closed, never used again. On the old code net/http read it by the
// chunked framing and the sidecar relayed and stored it, on a connection
// it kept.
func TestContentLengthWithChunkedIsUpstreamError(t *testing.T) {
	up := newLiar(t)
	rep := startReplicaYAML(t, fmt.Sprintf(liarConfig, up.URL()))
	for i, tc := range liarPaths {
		t.Run(tc.name, func(t *testing.T) {
			path := fmt.Sprintf(tc.path, 200+i)
			up.set("ok")
			rep.do(t, "GET", "/warm") // an idle connection to take
			up.set("clte")
			if code, _, b := rep.do(t, tc.method, path); code != http.StatusBadGateway {
				t.Errorf("%s %s: %d %q, want 502", tc.method, path, code, b)
			}
			up.set("ok")
			rep.do(t, "GET", "/after")
			if up.reusedAfter("clte") {
				t.Errorf("the connection of the answer framed both ways was used again")
			}
			if tc.method == "GET" {
				// Nothing stored: the next read asks the upstream.
				if code, _, b := rep.do(t, tc.method, path); code != http.StatusOK || b == "" {
					t.Errorf("again: %d %q, want a fresh 200", code, b)
				}
			}
			up.mu.Lock()
			up.calls = nil
			up.mu.Unlock()
		})
	}
}

// An upstream that sends 103 Early Hints and then closes the connection
// got the request: the one resend a reused connection allows (RFC 9112
// §9.3.1) is for a connection closed before the request was read, and on
// the old code it relayed the 103 a second time (two identical 103s, then
// the 502). Now: one 103, then the 502, and one upstream call.
func TestEarlyHintsThenCloseNotResent(t *testing.T) {
	up := newLiar(t)
	rep := startReplicaYAML(t, fmt.Sprintf(liarConfig, up.URL()))
	for i, path := range []string{"/other/%d", "/p/%d"} {
		path = fmt.Sprintf(path, 300+i)
		t.Run(path, func(t *testing.T) {
			up.set("ok")
			rep.do(t, "GET", "/warm") // the next request takes a reused connection
			up.mu.Lock()
			up.calls = nil
			up.mu.Unlock()
			up.set("early")
			statuses, _ := rawExchange(t, rep.proxy, "GET "+path+" HTTP/1.1\r\nHost: svc\r\nConnection: close\r\n\r\n")
			up.mu.Lock()
			calls := len(up.calls)
			up.mu.Unlock()
			if len(statuses) != 2 || !strings.HasPrefix(statuses[0], "103") || !strings.HasPrefix(statuses[1], "502") || calls != 1 {
				t.Errorf("answers %q after %d upstream calls; want one 103, then 502, after one call", statuses, calls)
			}
		})
	}
}
