package server_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestNetHTTPRefusalsReachAClientStillSending: a request net/http refuses
// itself, before any handler (400 for a request line, header or Host it
// cannot parse, 501 for a transfer coding it does not know, 505 for a
// version it does not speak, 417 for an Expect it cannot meet), is
// answered to a client still sending its large body, on both listeners,
// and counted once as malformed. Before, only the 431 lingered (edge's
// linger.go): after the others net/http closed at once with the body
// unread, which sent a reset (RFC 1122 §4.2.2.13), so the client's write
// failed or its stack dropped the answer; it saw ECONNRESET or EPIPE,
// never the status. The client sends its whole request, then reads.
func TestNetHTTPRefusalsReachAClientStillSending(t *testing.T) {
	up := newSeen(t)
	rep := startReplicaYAML(t, fmt.Sprintf(edgeConfig, "  read_header_timeout: 10s", up.URL, ""))
	want := map[string]float64{"framing": 0, "asterisk-form": 0, "read-timeout": 0, "loop": 0, "trace": 0, "write-timeout": 0, "malformed": 0, "header-too-large": 0, "send-budget": 0, "header-budget": 0}
	const size = 16 << 20 // far over what the sockets' buffers hold
	body := strings.Repeat("b", size)
	cl := fmt.Sprintf("Content-Length: %d\r\n", size)
	cases := []struct{ name, head, status string }{
		{"a request line", "GARBAGE /other\r\nHost: a\r\n" + cl, "400"},
		{"a header", "POST /other HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n" + cl, "400"},
		{"a Host", "POST /other HTTP/1.1\r\nHost: a b\r\n" + cl, "400"},
		{"a transfer coding", "POST /other HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: telepathy\r\n", "501"},
		{"a version", "POST /other HTTP/2.5\r\nHost: a\r\n" + cl, "505"},
		{"an Expect", "POST /other HTTP/1.1\r\nHost: a\r\nExpect: telepathy\r\n" + cl, "417"},
	}
	for _, addr := range []string{rep.proxy, rep.admin} {
		for _, tc := range cases {
			status, err := sendThenRead(addr, tc.head+"\r\n"+body)
			if err != nil || !strings.HasPrefix(status, tc.status) {
				t.Errorf("%s net/http refuses, body of %d bytes, on %s: answered %q, err %v; want %s", tc.name, size, addr, status, err, tc.status)
			}
			want["malformed"]++
			checkRefused(t, rep, want, tc.name+" on "+addr)
		}
	}
}
