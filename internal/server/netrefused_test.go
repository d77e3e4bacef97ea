package server_test

import (
	"fmt"
	"strings"
	"testing"
)

// net/http answers some requests itself, before any handler: a request
// line or header it cannot parse, an HTTP version it does not speak, an
// Expect it cannot meet (malformed), a header block over
// server.max_header_bytes (431, header-too-large). Each counts once in
// sidecache_edge_refused_total, on either listener, and what a handler
// answered counts nothing there: an error status, a POST whose body the
// handler never read (its answer is written after the handler returned),
// a good request before a malformed one on the same connection. On the
// old code net/http's answers were counted nowhere.
func TestNetHTTPRefusalsCounted(t *testing.T) {
	up := newSeen(t)
	rep := startReplicaYAML(t, fmt.Sprintf(edgeConfig, "  max_header_bytes: 1KiB", up.URL, ""))
	want := map[string]float64{"framing": 0, "asterisk-form": 0, "read-timeout": 0, "loop": 0, "trace": 0, "write-timeout": 0, "malformed": 0, "header-too-large": 0, "send-budget": 0, "header-budget": 0}
	check := func(after string) {
		t.Helper()
		checkRefused(t, rep, want, after)
	}
	check("start")

	exchange := func(addr, req, status string) {
		t.Helper()
		statuses, _ := rawExchange(t, addr, req)
		if len(statuses) == 0 || !strings.HasPrefix(statuses[len(statuses)-1], status) {
			t.Fatalf("%q: answered %q, want %s last", req, statuses, status)
		}
	}
	big := "GET /other HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("b", 8<<10) + "\r\n\r\n"
	for _, addr := range []string{rep.proxy, rep.admin} {
		exchange(addr, "GARBAGE\r\n\r\n", "400")
		want["malformed"]++
		check("a malformed request line on " + addr)

		exchange(addr, "GET /other HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n", "400")
		want["malformed"]++
		check("a malformed header on " + addr)

		exchange(addr, "GET /other HTTP/2.5\r\nHost: a\r\n\r\n", "505")
		want["malformed"]++
		check("an unknown version on " + addr)

		exchange(addr, "GET /other HTTP/1.1\r\nHost: a\r\nExpect: telepathy\r\n\r\n", "417")
		want["malformed"]++
		check("an Expect net/http cannot meet on " + addr)

		exchange(addr, big, "431")
		want["header-too-large"]++
		check("a header block over max_header_bytes on " + addr)

		// A good request, then a malformed one, on one connection: the
		// first is a handler's, the second net/http's.
		exchange(addr, "GET /nothing-here HTTP/1.1\r\nHost: a\r\n\r\nGARBAGE\r\n\r\n", "400")
		want["malformed"]++
		check("a malformed request after a good one on " + addr)

		// Handlers' answers, error statuses included: nothing counts.
		exchange(addr, "POST /purge?all=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello", "")
		exchange(addr, "GET /nothing-here HTTP/1.1\r\nHost: a\r\n\r\nGET /nothing-here HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", "")
		check("handlers' answers on " + addr)
	}
	// The edge's own refusal of a request whose body it never read.
	exchange(rep.proxy, "TRACE /other HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello", "405")
	want["trace"]++
	check("a TRACE with a body")
}
