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

// stalledHeader dials addr and sends the first size bytes of a request
// whose header section never ends (one long field line), then stalls.
func stalledHeader(t *testing.T, addr, path string, size int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(addr, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head := "GET " + path + " HTTP/1.1\r\nHost: a\r\nX-Pad: "
	if _, err := io.WriteString(c, head+strings.Repeat("p", size-len(head))); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitHeaderBudget waits (a count, polled; capGuard only bounds a hang)
// until the replica holds held header bytes and has cut cut connections
// under the header budget, and fails the test otherwise.
func waitHeaderBudget(t *testing.T, rep *replica, held, cut float64, after string) {
	t.Helper()
	deadline := time.Now().Add(capGuard)
	for {
		h := metric(t, rep, "sidecache_client_pending_header_bytes")
		c := edgeRefused(t, rep)["header-budget"]
		if h == held && c == cut {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v header bytes held, %v cut (header-budget); want %v held, %v cut", after, h, c, held, cut)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHeaderBudgetAnswers431ToTheLargestStalled: with
// server.max_pending_header_bytes at two and a half stalled sections,
// clients that send most of a large header section and stall, one after
// the other (four on the proxy listener, the fifth on the admin
// listener: one budget for the process), are answered 431 and closed
// (RFC 6585 §5) as each new one goes over it, the one stalled longest
// among the largest first: after five, three were answered 431 (counted
// under header-budget), two are held, and those two, once they end their
// sections, are served. Meanwhile a client that sends an ordinary
// request, and /readyz, are answered. Before the budget every such
// connection held its bytes (and net/http's copy of them) until
// read_header_timeout.
func TestHeaderBudgetAnswers431ToTheLargestStalled(t *testing.T) {
	const size = 12 << 10
	up := newSeen(t)
	rep := startReplicaYAML(t, fmt.Sprintf(edgeConfig,
		fmt.Sprintf("  read_header_timeout: 60s\n  max_pending_header_bytes: %d", 2*size+size/2), up.URL, ""))
	var conns []net.Conn
	for i := 1; i <= 5; i++ {
		addr, path := rep.proxy, "/other"
		if i == 5 {
			addr, path = rep.admin, "/healthz"
		}
		conns = append(conns, stalledHeader(t, addr, path, size))
		waitHeaderBudget(t, rep, float64(min(i, 2)*size), float64(max(i-2, 0)), fmt.Sprintf("%d stalled sections", i))
		if code, _, body := rep.do(t, http.MethodGet, "/other"); code != http.StatusOK {
			t.Errorf("an ordinary request beside %d stalled sections: %d %q", i, code, body)
		}
		if code, _, body := rep.do(t, http.MethodGet, "admin:/readyz"); code != http.StatusOK {
			t.Errorf("/readyz beside %d stalled sections: %d %q", i, code, body)
		}
	}
	for i, c := range conns {
		_ = c.SetDeadline(time.Now().Add(capGuard))
		if i < 3 {
			// Cut: the 431, then the end of the stream.
			got, err := io.ReadAll(c)
			if err != nil || !strings.HasPrefix(string(got), "HTTP/1.1 431 ") {
				t.Errorf("stalled section %d (cut): read %q, err %v; want a 431 and the end of the stream", i+1, got, err)
			}
			continue
		}
		// Held: it ends its section and is served.
		if _, err := io.WriteString(c, "\r\n\r\n"); err != nil {
			t.Fatalf("stalled section %d (held): %v", i+1, err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Errorf("stalled section %d (held) once ended: %v; want it served", i+1, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("stalled section %d (held) once ended: %d; want 200", i+1, resp.StatusCode)
		}
	}
	waitHeaderBudget(t, rep, 0, 3, "the held sections ended")
	// A section over max_header_bytes, which net/http refuses itself
	// once it has read its bound (it reads no more of the connection):
	// counted while it arrives, taken out when the connection closes.
	if status, err := sendThenRead(rep.proxy, headerSection("/other", 70<<10, 0)); err != nil || !strings.HasPrefix(status, "431") {
		t.Errorf("a section over max_header_bytes: answered %q, err %v; want 431", status, err)
	}
	waitHeaderBudget(t, rep, 0, 3, "a section over max_header_bytes refused by net/http")
	if max := metric(t, rep, "sidecache_client_pending_header_bytes_max"); max != 2*size+size/2 {
		t.Errorf("sidecache_client_pending_header_bytes_max %v, want %d", max, 2*size+size/2)
	}
}
