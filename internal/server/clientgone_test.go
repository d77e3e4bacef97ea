package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// What net/http's background read gives the sidecar, on real sockets: a
// client that goes away while its request waits ends the request, and
// pipelined requests are answered in order (internal/edge reads the
// client's connection; see its package doc).

// goneYAML: a batched route (/users/{id}), a cached one (/clients/{id},
// whose concurrent misses share one upstream call) and pass-through for
// anything else, with the access log on (its 499 is the request ended
// because its client left).
const goneYAML = `
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstream: {url: %s, timeout: 30s}
log: {access: true}
cache: {l1: {max_bytes: 1MiB}}
routes:
  - name: client
    path: /clients/{id}
    ttl: 1m
  - name: user
    path: /users/{id}
    ttl: 1m
    batch: {path: /users, param: ids, id_field: id, max_wait: 1ms}
`

// heldOrigin answers once released: the bulk call GET /users?ids=…
// with one element per id, anything else with its path. It tells
// arrived of each call and ended how each ended: "cancelled" when its
// request's context ended first, "answered" otherwise.
type heldOrigin struct {
	url      string
	arrived  chan string
	ended    chan string
	release  chan struct{}
	released sync.Once
}

func newHeldOrigin(t *testing.T) *heldOrigin {
	o := &heldOrigin{arrived: make(chan string, 16), ended: make(chan string, 16), release: make(chan struct{})}
	srv := newServerT(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.arrived <- r.URL.Path
		select {
		case <-o.release:
		case <-r.Context().Done():
			o.ended <- "cancelled"
			return
		}
		if r.URL.Path == "/users" {
			w.Header().Set("Content-Type", "application/json")
			var els []string
			for _, id := range strings.Split(r.URL.Query().Get("ids"), ",") {
				els = append(els, fmt.Sprintf(`{"id":%s}`, id))
			}
			io.WriteString(w, "["+strings.Join(els, ",")+"]")
		} else {
			io.WriteString(w, "answer "+r.URL.Path)
		}
		o.ended <- "answered"
	}))
	o.url = srv
	t.Cleanup(o.unblock) // before the origin closes, should the test fail
	return o
}

func (o *heldOrigin) unblock() { o.released.Do(func() { close(o.release) }) }

// newServerT is an httptest server on h, closed at the test's end.
func newServerT(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// sendRaw opens a connection to the sidecar's proxy listener and writes
// req on it.
func sendRaw(t *testing.T, r *replica, req string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(r.proxy, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	return c.(*net.TCPConn)
}

func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second): // only a hang gets here
		t.Fatalf("%s: nothing within 10 s", what)
		var zero T
		return zero
	}
}

// statuses are the access log's status fields, in the order logged.
func statuses(buf *syncBuffer) []any {
	var s []any
	for _, l := range buf.lines() {
		s = append(s, l["status"])
	}
	return s
}

// A client that closes its connection, or half-closes it (shutdown of its
// writing side: it will send nothing more), while its request waits for
// the upstream ends that request at once, before the upstream answers: a
// batched miss leaves its batch, a request waiting for another's fetch
// (coalesced) leaves the flight, a pass-through's upstream request is
// cancelled. Each is logged 499. A half-close is a client gone, as
// NGINX's 499 (proxy_ignore_client_abort off) and net/http's background
// read treat it, and it is sent no answer at all: the connection is closed
// without one, not answered 200 with an empty body (what net/http writes
// for a handler that wrote nothing).
func TestClientGoneEndsWaitingRequest(t *testing.T) {
	for _, how := range []string{"close", "half-close"} {
		for _, tc := range []struct{ name, path, upstream string }{
			{"batched miss", "/users/7", "/users"},
			{"coalesced fill", "/clients/1", "/clients/1"},
			{"pass-through", "/other", "/other"},
		} {
			t.Run(how+"/"+tc.name, func(t *testing.T) {
				o := newHeldOrigin(t)
				rep, buf := accessReplica(t, fmt.Sprintf(goneYAML, o.url))
				req := "GET " + tc.path + " HTTP/1.1\r\nHost: clients.svc\r\n\r\n"
				clients := []*net.TCPConn{sendRaw(t, rep, req)}
				if got := within(t, o.arrived, "the upstream call"); got != tc.upstream {
					t.Fatalf("upstream got %s, want %s", got, tc.upstream)
				}
				if tc.name == "coalesced fill" {
					clients = append(clients, sendRaw(t, rep, req)) // waits for the first's fetch
				}
				for _, c := range clients {
					leave(t, c, how)
				}
				eventually(t, 10*time.Second, "each departed client's request logged", func() bool { return len(buf.lines()) == len(clients) })
				for i, s := range statuses(buf) {
					if s != float64(499) {
						t.Errorf("request %d logged status %v, want 499", i, s)
					}
				}
				if tc.name == "pass-through" {
					if got := within(t, o.ended, "the upstream request's end"); got != "cancelled" {
						t.Errorf("upstream request %s, want cancelled", got)
					}
				}
				if how == "half-close" {
					for i, c := range clients {
						_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
						if b, err := io.ReadAll(c); len(b) != 0 || err != nil {
							t.Errorf("half-closed client %d read %q, %v; want the connection closed without an answer", i, b, err)
						}
					}
				}
				// The fetch a batched or coalesced request left goes on.
				o.unblock()
				if tc.name != "pass-through" {
					if got := within(t, o.ended, "the upstream call's end"); got != "answered" {
						t.Errorf("upstream call %s, want answered", got)
					}
				}
				if n := len(o.arrived); n != 0 {
					t.Errorf("%d more upstream calls, want none", n)
				}
			})
		}
	}
}

// leave closes c, or shuts down its writing side only.
func leave(t *testing.T, c *net.TCPConn, how string) {
	t.Helper()
	var err error
	if how == "close" {
		err = c.Close()
	} else {
		err = c.CloseWrite()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// Requests pipelined on one connection (all written before any answer is
// read) are each answered, in the order sent: batched misses, L1 hits, a
// coalesced fill and pass-through mixed. The second request arrives while
// the first waits for its bulk call, so the first's background read takes
// the second's first byte, which must not be lost; the rest come together.
func TestPipelinedRequestsAnsweredInOrder(t *testing.T) {
	o := newHeldOrigin(t)
	rep, _ := accessReplica(t, fmt.Sprintf(goneYAML, o.url))
	paths := []string{"/users/1", "/users/2", "/clients/5", "/other/a", "/users/1", "/clients/5", "/users/3", "/other/b", "/clients/6", "/users/4"}
	reqs := make([]string, len(paths))
	for i, p := range paths {
		reqs[i] = fmt.Sprintf("GET %s HTTP/1.1\r\nHost: clients.svc\r\n\r\n", p)
	}
	c := sendRaw(t, rep, reqs[0])
	if got := within(t, o.arrived, "the first request's bulk call"); got != "/users" {
		t.Fatalf("upstream got %s, want /users", got)
	}
	if _, err := io.WriteString(c, strings.Join(reqs[1:], "")); err != nil {
		t.Fatal(err)
	}
	o.unblock()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	for i, p := range paths {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d (%s): %v", i, p, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := "answer " + p
		if strings.HasPrefix(p, "/users/") {
			want = `{"id":` + strings.TrimPrefix(p, "/users/") + `}`
		}
		if err != nil || resp.StatusCode != http.StatusOK || string(b) != want {
			t.Errorf("answer %d (%s): %d %q, %v; want 200 %q", i, p, resp.StatusCode, b, err, want)
		}
	}
	c.CloseWrite()
	if b, err := io.ReadAll(br); len(b) != 0 || err != nil {
		t.Errorf("after the last answer: %q, %v; want the end of the stream", b, err)
	}
}
