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
