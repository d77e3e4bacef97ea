package server_test

import (
	"fmt"
	"strings"
	"testing"
)

// RFC 9112 §5.2: a request with obs-fold (a field line starting with a
// space or a tab) is answered 400 and its connection closed, as NGINX
// does, and counted as framing: net/http joins the folded line into the
// field before it, so "X-A: b\r\n Transfer-Encoding: chunked" beside a
// Content-Length was framed by the length, while a front proxy that read
// the folded line as its own Transfer-Encoding framed it chunked. A
// body's indented lines (pretty-printed JSON), on the same kept-alive
// connection as later requests, are no fold. On the old code the folded
// requests were answered 200 and the connection kept.
func TestObsFoldRefused(t *testing.T) {
	up := newSeen(t)
	rep := startReplicaYAML(t, fmt.Sprintf(edgeConfig, "  read_timeout: 60s", up.URL, ""))
	want := map[string]float64{"framing": 0, "asterisk-form": 0, "read-timeout": 0, "loop": 0, "trace": 0, "write-timeout": 0, "malformed": 0, "header-too-large": 0, "send-budget": 0, "header-budget": 0}
	json := "{\n  \"a\": 1,\n\t\"b\": [\n    2\n  ]\n}\n"
	for _, tc := range []struct{ name, req string }{
		{"folded Transfer-Encoding beside Content-Length", "POST /other HTTP/1.1\r\nHost: a\r\nX-A: b\r\n Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\nGET /other HTTP/1.1\r\nHost: a\r\n\r\n"},
		{"tab fold on a GET", "GET /other HTTP/1.1\r\nHost: a\r\nX-A: b\r\n\tc\r\n\r\nGET /other HTTP/1.1\r\nHost: a\r\n\r\n"},
		{"fold on a cached route", "GET /clients/1 HTTP/1.1\r\nHost: a\r\nAccept: a\r\n  text/html\r\n\r\n"},
		{"fold in the second request, after an indented body", fmt.Sprintf("POST /other HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n%sGET /other HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n", len(json), json)},
		{"fold after a chunked body", "POST /other HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n  x\r\n0\r\n\r\nGET /other HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			statuses, closed := rawExchange(t, rep.proxy, tc.req)
			if len(statuses) == 0 || !strings.HasPrefix(statuses[len(statuses)-1], "400") || !closed {
				t.Errorf("answers %q, closed %v; want the folded request's 400 last and the connection closed", statuses, closed)
			}
			want["framing"]++
			checkRefused(t, rep, want, tc.name)
		})
	}
	// Indented body lines, pipelined or not, are no fold: every request
	// is answered, the connection kept.
	for _, req := range []string{
		fmt.Sprintf("POST /other HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n%sGET /other HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", len(json), json),
		"POST /other HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n\r\n  x\r\n0\r\nX-T: 1\r\n\r\nGET /other HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
	} {
		if statuses, _ := rawExchange(t, rep.proxy, req); len(statuses) != 2 || statuses[0] != "200 OK" || statuses[1] != "200 OK" {
			t.Errorf("indented body: answers %q, want two 200s", statuses)
		}
	}
	checkRefused(t, rep, want, "indented bodies")
}
