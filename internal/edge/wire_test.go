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
	"testing"
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
		srv.Config.MaxHeaderBytes = 1
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
