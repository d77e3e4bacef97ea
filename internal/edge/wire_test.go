package edge

import (
	"bufio"
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

type tally struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *tally) EdgeRefused(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[reason]++
}

func (c *tally) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, r := range []string{ReasonMalformed, ReasonHeaderTooLarge} {
		fmt.Fprintf(&b, "%s=%d ", r, c.n[r])
	}
	return b.String()
}

// send writes req on a new connection to srv and reads every answer
// until the server closes it.
func send(t *testing.T, srv *httptest.Server, req string) []int {
	t.Helper()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, req)
	br := bufio.NewReader(c)
	var codes []int
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return codes
		}
		io.Copy(io.Discard, resp.Body)
		codes = append(codes, resp.StatusCode)
	}
}

// Under Wire, a write outside a handler's answer is net/http's own and
// counts once by its code; a handler's 400 (its body unread, so the
// answer is written after the handler returned) counts nothing. Without
// Wire the listener counts nothing at all: it cannot tell.
func TestWireCountsNetHTTPAnswers(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
	})
	for _, wired := range []bool{true, false} {
		count := &tally{n: map[string]int{}}
		srv := httptest.NewUnstartedServer(h)
		srv.Listener = Listener(srv.Listener, 0, count)
		srv.Config.MaxHeaderBytes = 1024
		if wired {
			Wire(srv.Config)
		} else {
			srv.Config.ConnContext = ConnContext
		}
		srv.Start()
		defer srv.Close()

		if got := fmt.Sprint(send(t, srv, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\nHost: a\r\n\r\nGARBAGE\r\n\r\n")); got != "[400 400 400]" {
			t.Fatalf("answers %s, want the handler's two 400s and net/http's", got)
		}
		if got := fmt.Sprint(send(t, srv, "GET / HTTP/1.1\r\nHost: a\r\nX: "+strings.Repeat("x", 8<<10)+"\r\n\r\n")); got != "[431]" {
			t.Fatalf("answers %s, want net/http's 431", got)
		}
		want := "malformed=1 header-too-large=1 "
		if !wired {
			want = "malformed=0 header-too-large=0 "
		}
		if got := count.String(); got != want {
			t.Errorf("wired %v: counted %s, want %s", wired, got, want)
		}
	}
}

// A body behind Expect: 100-continue is watched like any other, and the
// client still gets its 100 when a handler reads the body, and its answer
// at once when the handler answers without reading it (net/http then
// closes the connection: no 100 was sent, RFC 9110 §10.1.1). The client
// here waits for one or the other before it sends the body, as the Go
// client does. On the code that wrapped such a body in place of
// net/http's own reader, the unread case sent nothing: net/http drained
// the body before answering, from beneath the reader that sends the 100
// ("i/o timeout", the hang guard's deadline).
func TestWireExpectBody(t *testing.T) {
	for _, read := range []bool{true, false} {
		var timed atomic.Bool // the handler read through the watched body
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c := FromContext(r.Context())
			timed.Store(c.body != nil && r.Body == io.ReadCloser(c.body))
			if read {
				_, _ = io.Copy(io.Discard, r.Body)
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		srv.Listener = Listener(srv.Listener, 0, nil)
		Wire(srv.Config)
		srv.Start()
		defer srv.Close()
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang guard
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("read %v: before the body, %v", read, err)
		}
		want := []int{http.StatusContinue, http.StatusServiceUnavailable}
		if !read {
			want = want[1:]
		}
		if resp.StatusCode != want[0] {
			t.Fatalf("read %v: before the body, %s, want %d", read, resp.Status, want[0])
		}
		if read {
			io.WriteString(c, "abcd")
			if resp, err = http.ReadResponse(br, nil); err != nil || resp.StatusCode != want[1] {
				t.Fatalf("read %v: after the body, %v (%v), want %d", read, resp, err, want[1])
			}
		}
		if !timed.Load() {
			t.Errorf("read %v: the body was not watched", read)
		}
	}
}
