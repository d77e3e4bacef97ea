package server_test

import (
	"fmt"
	"strings"
	"testing"
)

// RFC 9112 §3.2.4: the asterisk-form request target is for OPTIONS only.
// Any other method with "*" (an HTTP/2 prior-knowledge preface, PRI * on an
// HTTP/1 port, included) is answered 400 and its connection closed, as
// NGINX does, and counted under asterisk-form; nothing reaches the
// upstream. On the old code each was forwarded as "/%2A", a path the client
// never sent, and the upstream's answer relayed.
func TestAsteriskFormOnlyForOptions(t *testing.T) {
	up := newSeen(t)
	rep := startReplicaYAML(t, fmt.Sprintf(edgeConfig, "  read_timeout: 60s", up.URL, ""))
	for _, req := range []string{
		"GET * HTTP/1.1\r\nHost: a\r\n\r\n",
		"DELETE * HTTP/1.1\r\nHost: a\r\n\r\n",
		"HEAD * HTTP/1.1\r\nHost: a\r\n\r\n",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
	} {
		t.Run(strings.Fields(req)[0], func(t *testing.T) {
			before := edgeRefused(t, rep)["asterisk-form"]
			statuses, closed := rawExchange(t, rep.proxy, req)
			if len(statuses) != 1 || !strings.HasPrefix(statuses[0], "400") || !closed {
				t.Errorf("answers %q, closed %v; want one 400 and the connection closed", statuses, closed)
			}
			if got := edgeRefused(t, rep)["asterisk-form"]; got != before+1 {
				t.Errorf("asterisk-form counted %v, want %v", got, before+1)
			}
		})
	}
	if n := up.calls.Load(); n != 0 {
		t.Errorf("the upstream was sent %d asterisk-form requests, want none", n)
	}
	// OPTIONS * is the form's one use: not refused.
	statuses, _ := rawExchange(t, rep.proxy, "OPTIONS * HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	if len(statuses) != 1 || strings.HasPrefix(statuses[0], "400") {
		t.Errorf("OPTIONS *: answers %q, want one answer, not 400", statuses)
	}
}
