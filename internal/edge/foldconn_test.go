package edge

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// edgeServer serves h as internal/server does (Listener, Wire, Guard)
// and returns its address.
func edgeServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := Wire(&http.Server{Handler: NewGuard(h, Options{Upgrades: []string{"echo"}}), ReadTimeout: 10 * time.Second})
	go srv.Serve(Listener(ln, time.Minute, nil))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// exchange writes each of parts on one connection, in order, and reads
// every answer until the server closes it: their codes and bodies.
func exchange(t *testing.T, addr string, parts ...string) []string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // a hang guard
	go func() {
		for _, p := range parts {
			if _, err := io.WriteString(c, p); err != nil {
				return
			}
		}
	}()
	br := bufio.NewReader(c)
	var got []string
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return got
		}
		b, _ := io.ReadAll(resp.Body)
		got = append(got, fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b))))
	}
}

// counting answers each request with its body's length, counting the
// requests that reached it with X-A (the folded ones below).
func counting(folded *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-A") != "" {
			folded.Add(1)
		}
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, n)
	})
}

// D7 on one keep-alive connection: a valid request framed oddly (a
// length after 130 blanks or of 19 digits, a chunk size of 16 hex
// digits, a long extension or Transfer-Encoding line), which net/http
// frames, and then a folded request: the folded one is refused 400 and
// closed, and never reaches the handler. On the code whose fold scan
// gave up on such a request (128-byte lines, 18 digits), the folded one
// was answered 200. After OPTIONS *, which net/http answered itself
// without the handler, and after "\r\r\n\n", which net/http skips after
// a POST and the scan took for a header section, the requests were
// numbered one off and the folded one reached the handler too.
func TestFoldAfterOddFramingRefused(t *testing.T) {
	var folded atomic.Int32
	addr := edgeServer(t, counting(&folded))
	post := "POST / HTTP/1.1\r\nHost: a\r\n"
	fold := "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n"
	for _, tc := range []struct{ name, lead, want string }{
		{"130 blanks", post + "Content-Length:" + strings.Repeat(" ", 130) + "5\r\n\r\nhello", "200 5"},
		{"19 digits", post + "Content-Length: 0000000000000000005\r\n\r\nhello", "200 5"},
		{"16 hex digits", post + "Transfer-Encoding: chunked\r\n\r\n0000000000000005\r\nhello\r\n0\r\n\r\n", "200 5"},
		{"a long extension", post + "Transfer-Encoding: chunked\r\n\r\n5;" + strings.Repeat("e", 200) + "\r\nhello\r\n0\r\n\r\n", "200 5"},
		{"a long Transfer-Encoding", post + "Transfer-Encoding:" + strings.Repeat(" ", 200) + "chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "200 5"},
		{"OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", "200 "},
		{"an empty line", post + "Content-Length: 5\r\n\r\nhello\r\n", "200 5"},
		{"CR CR LF LF after a POST", post + "Content-Length: 5\r\n\r\nhello\r\r\n\n", "200 5"},
	} {
		got := exchange(t, addr, tc.lead, fold)
		if len(got) != 2 || got[0] != tc.want || got[1] != "400 obsolete line folding" {
			t.Errorf("%s: answers %q, want %q then the fold's 400, closed", tc.name, got, tc.want)
		}
	}
	if n := folded.Load(); n != 0 {
		t.Errorf("%d folded requests reached the handler, want none", n)
	}
}

// RFC 9112 §2.2: empty lines (CRLF or LF) before a request line are
// ignored, and a stray CR, as NGINX does, at the connection's start and
// between keep-alive requests (after a body, a CRLF that old clients
// sent), up to maxLead bytes of them; never in a body. On the code
// before, net/http answered each 400 (but after a POST, up to 4 bytes).
func TestEmptyLinesBeforeRequest(t *testing.T) {
	var folded atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	h := counting(&folded)
	addr := edgeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/wait" {
			started <- struct{}{}
			<-release
		}
		h.ServeHTTP(w, r)
	}))
	get := "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
	last := "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
	bad := "400 400 Bad Request" // net/http's own, and its reason
	for _, tc := range []struct {
		name string
		in   string
		want []string // each answer's beginning
	}{
		{"CRLF first", "\r\n" + last, []string{"200 0"}},
		{"LFs and CRLFs first", "\n\r\n\n" + last, []string{"200 0"}},
		{"between two requests", get + "\r\n" + last, []string{"200 0", "200 0"}},
		{"after a length body", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello\r\n" + last, []string{"200 5", "200 0"}},
		{"after a chunked body", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n\r\n\r\n" + last, []string{"200 5", "200 0"}},
		{"a body that begins with CRLF", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 7\r\n\r\n\r\nhello" + last, []string{"200 7", "200 0"}},
		{"chunk data that begins with CRLF", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n7\r\n\r\nhello\r\n0\r\n\r\n" + last, []string{"200 7", "200 0"}},
		{"a stray CR", "\r" + last, []string{"200 0"}},
		{"the bound", strings.Repeat("\r\n", maxLead/2) + last, []string{"200 0"}},
		{"past the bound", strings.Repeat("\r\n", maxLead/2+1) + last, []string{bad}},
	} {
		if got := exchange(t, addr, tc.in); !answered(got, tc.want) {
			t.Errorf("%s: answers %q, want %q", tc.name, got, tc.want)
		}
	}

	// A CRLF that comes a byte at a time while a request is answered:
	// net/http's background read, of one byte, takes it.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // a hang guard
	io.WriteString(c, "GET /wait HTTP/1.1\r\nHost: a\r\n\r\n")
	<-started
	io.WriteString(c, "\r")
	time.Sleep(20 * time.Millisecond) // lets the CR come alone; the outcome does not depend on it
	io.WriteString(c, "\n")
	time.Sleep(20 * time.Millisecond)
	close(release)
	io.WriteString(c, last)
	var got []string
	br := bufio.NewReader(c)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			break
		}
		resp.Body.Close()
		got = append(got, resp.Status)
	}
	if len(got) != 2 || got[0] != "200 OK" || got[1] != "200 OK" {
		t.Errorf("a CRLF while answered: answers %q, want two 200s", got)
	}
}

// answered reports whether each answer begins as wanted.
func answered(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !strings.HasPrefix(got[i], want[i]) {
			return false
		}
	}
	return true
}

// An upgraded connection's bytes are no requests: its empty lines reach
// the tunnel as they came.
func TestEmptyLinesKeptAfterUpgrade(t *testing.T) {
	addr := edgeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		b := make([]byte, 6)
		if _, err := io.ReadFull(brw, b); err == nil {
			c.Write(b)
		}
	}))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v, %v", resp, err)
	}
	io.WriteString(c, "\r\n\nhi\n")
	b := make([]byte, 6)
	if _, err := io.ReadFull(br, b); err != nil || string(b) != "\r\n\nhi\n" {
		t.Errorf("the tunnel echoed %q, %v; want what was sent", b, err)
	}
}
