package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestOversizedHeaderSectionAnswered431: every request header section
// over server.max_header_bytes (64 KiB by default) is answered 431
// (RFC 6585 §5) and its connection closed, on both listeners, counted in
// sidecache_edge_refused_total{reason="header-too-large"}; one of exactly
// the bound is served. Before, net/http read the bound and 4 KiB more
// before it refused, so a section of 64 KiB + 1 was served; and a client
// still sending a section far over the bound when net/http closed the
// connection got a reset, never the 431 (edge's linger.go). The client
// here sends its whole request, then reads, as a client does; a section
// is one huge field line or many small ones. A bound of 1 KiB, under
// what net/http can bound (4097 bytes), holds too.
func TestOversizedHeaderSectionAnswered431(t *testing.T) {
	up := newSeen(t)
	rep := startReplicaYAML(t, fmt.Sprintf(edgeConfig, "  read_header_timeout: 10s", up.URL, ""))
	const limit = 64 << 10
	want := map[string]float64{"framing": 0, "asterisk-form": 0, "read-timeout": 0, "loop": 0, "trace": 0, "write-timeout": 0, "malformed": 0, "header-too-large": 0, "send-budget": 0, "header-budget": 0}
	cases := []struct {
		name  string
		size  int // bytes of the header section, request line to empty line
		line  int // bytes of each field line but the last; 0: one line
		refus bool
	}{
		{"one line at the bound", limit, 0, false},
		{"small lines at the bound", limit, 100, false},
		{"one line a byte over", limit + 1, 0, true},
		{"small lines a byte over", limit + 1, 100, true},
		{"one line 4 KiB over", limit + 4096, 0, true},
		{"one line far over", 32 << 20, 0, true},
		{"small lines far over", 32 << 20, 100, true},
	}
	for _, addr := range []string{rep.proxy, rep.admin} {
		path := "/other"
		if addr == rep.admin {
			path = "/healthz"
		}
		for _, tc := range cases {
			req := headerSection(path, tc.size, tc.line)
			status, err := sendThenRead(addr, req)
			wantStatus := "200"
			if tc.refus {
				wantStatus = "431"
				want["header-too-large"]++
			}
			if err != nil || !strings.HasPrefix(status, wantStatus) {
				t.Errorf("%s on %s: answered %q, err %v; want %s", tc.name, addr, status, err, wantStatus)
			}
			checkRefused(t, rep, want, tc.name+" on "+addr)
		}
	}
	// A second request on a kept-alive connection, over the bound.
	c, err := net.Dial("tcp", strings.TrimPrefix(rep.proxy, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i, size := range []int{limit, limit + 100} {
		if _, err := io.WriteString(c, headerSection("/other", size, 100)); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d on one connection: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if code := []int{200, 431}[i]; resp.StatusCode != code {
			t.Errorf("request %d of %d bytes on one connection: %d, want %d", i, size, resp.StatusCode, code)
		}
	}
	want["header-too-large"]++
	checkRefused(t, rep, want, "a kept-alive connection's second request")

	// A bound of 4 KiB or less, under net/http's least (4097 bytes):
	// the handler refuses what net/http let through.
	small := startReplicaYAML(t, fmt.Sprintf(edgeConfig, "  max_header_bytes: 1KiB", up.URL, ""))
	smallWant := map[string]float64{"framing": 0, "asterisk-form": 0, "read-timeout": 0, "loop": 0, "trace": 0, "write-timeout": 0, "malformed": 0, "header-too-large": 0, "send-budget": 0, "header-budget": 0}
	for _, addr := range []string{small.proxy, small.admin} {
		path := "/other"
		if addr == small.admin {
			path = "/healthz"
		}
		for _, tc := range []struct {
			size, line int
			code       string
		}{{1 << 10, 0, "200"}, {2 << 10, 0, "431"}, {2 << 10, 50, "431"}} {
			status, err := sendThenRead(addr, headerSection(path, tc.size, tc.line))
			if err != nil || !strings.HasPrefix(status, tc.code) {
				t.Errorf("bound 1 KiB, %d bytes in lines of %d on %s: %q, err %v; want %s", tc.size, tc.line, addr, status, err, tc.code)
			}
			if tc.code == "431" {
				smallWant["header-too-large"]++
			}
		}
		checkRefused(t, small, smallWant, "bound 1 KiB on "+addr)
	}
}

// headerSection is a GET of path whose header section is size bytes,
// request line to empty line included: field lines of line bytes each
// (0: one), the last one taking up what is left.
func headerSection(path string, size, line int) string {
	var b strings.Builder
	b.Grow(size)
	b.WriteString("GET " + path + " HTTP/1.1\r\nHost: a\r\n")
	for i := 0; ; i++ {
		name := fmt.Sprintf("X-Pad-%d: ", i)
		left := size - b.Len() - 2 // the empty line's CRLF
		n := line
		if n == 0 || left-n < len(name)+8 {
			n = left
		}
		b.WriteString(name)
		b.WriteString(strings.Repeat("p", n-len(name)-2))
		b.WriteString("\r\n")
		if n == left {
			break
		}
	}
	b.WriteString("\r\n")
	return b.String()
}

// sendThenRead writes req whole on a new connection, then reads the
// answer's status line and the connection's end (the deadline is a hang
// guard). err is the write's failure, the read's, or a connection kept
// open after a 431.
func sendThenRead(addr, req string) (status string, err error) {
	c, err := net.Dial("tcp", strings.TrimPrefix(addr, "http://"))
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		return "", fmt.Errorf("write: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", fmt.Errorf("read: %w", err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return resp.Status, fmt.Errorf("body: %w", err)
	}
	if resp.StatusCode == http.StatusRequestHeaderFieldsTooLarge && !resp.Close {
		return resp.Status, fmt.Errorf("431 without Connection: close")
	}
	return resp.Status, nil
}
