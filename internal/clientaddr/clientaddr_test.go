package clientaddr

import (
	"net/http"
	"testing"
)

// Set replaces a client's X-Real-Ip with the peer and drops the other
// address claims, whatever the client sent; with no parsable peer it
// writes none (as SetXForwarded writes no X-Forwarded-For).
func TestSet(t *testing.T) {
	h := http.Header{"X-Real-Ip": {"6.6.6.6", "7.7.7.7"}, "True-Client-Ip": {"6.6.6.6"}, "Cf-Connecting-Ip": {"6.6.6.6"}, "Accept": {"*/*"}}
	Set(h, "[::1]:4711")
	if got := h["X-Real-Ip"]; len(got) != 1 || got[0] != "::1" || len(h) != 2 || h.Get("Accept") != "*/*" {
		t.Errorf("after Set: %v; want X-Real-Ip ::1 and Accept alone", h)
	}
	h = http.Header{"X-Real-Ip": {"6.6.6.6"}}
	if Set(h, "not an address"); len(h) != 0 {
		t.Errorf("unparsable peer: %v, want nothing", h)
	}
}

// Replaced names X-Real-Ip and every dropped address claim, and nothing a
// request needs (the X-Forwarded-For/-Host/-Proto the sidecar rewrites
// itself are another rule's).
func TestReplaced(t *testing.T) {
	for _, k := range []string{"X-Real-Ip", "True-Client-Ip", "X-Client-Ip", "X-Cluster-Client-Ip", "Cf-Connecting-Ip",
		"Fastly-Client-Ip", "Client-Ip", "X-Originating-Ip", "X-Remote-Ip", "X-Remote-Addr", "Forwarded-For", "X-Forwarded",
		"X-Original-Forwarded-For", "X-Forwarded-Port", "X-Forwarded-Ssl", "X-Forwarded-Scheme", "X-Forwarded-Server",
		"X-Envoy-External-Address", "X-Proxyuser-Ip"} {
		if !Replaced(k) {
			t.Errorf("Replaced(%q) = false", k)
		}
	}
	for _, k := range []string{"Accept", "Host", "Cookie", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "x-real-ip", "X-Real-Ip2"} {
		if Replaced(k) {
			t.Errorf("Replaced(%q) = true", k)
		}
	}
}
