package proxy_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// switchProtocols answers 101 on a hijacked connection, then closes it.
func switchProtocols(w http.ResponseWriter, r *http.Request) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	_ = buf.Flush()
}

// An upstream that switches protocols on a GET that did not ask to upgrade
// is answered 502 at once (RFC 9110 §15.2.2), not relayed to a client that
// would hang until the upstream timeout.
func TestUnrequested101IsBadGateway(t *testing.T) {
	up := newUpstream(t, switchProtocols)
	rt := testRoute{Name: "c", Pattern: "/c/{id}", TTL: time.Minute}
	e := newEnv(t, up, []testRoute{rt})
	resp, _ := e.get("/c/1")
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d %q, want 502", resp.StatusCode, cacheStatus(resp))
	}
}

// A write that upgrades the connection may carry writes of its own over the
// new protocol: its route's tags are invalidated as for a 2xx.
func TestUpgradedWriteInvalidates(t *testing.T) {
	var version int
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch {
			version++
			switchProtocols(w, r)
			return
		}
		w.Write([]byte(strings.Repeat("v", version+1)))
	})
	read := testRoute{Name: "c", Pattern: "/c/{id}", TTL: time.Minute, Tags: []string{"c:{id}"}}
	write := testRoute{Name: "cw", Methods: []string{"PATCH"}, Pattern: "/c/{id}", Invalidate: []string{"c:{id}"}}
	e := newEnv(t, up, []testRoute{read, write}, withL1Invalidator)
	e.get("/c/1")
	if resp, _ := e.get("/c/1"); !strings.Contains(cacheStatus(resp), "hit") {
		t.Fatalf("not cached: %q", cacheStatus(resp))
	}
	e.do("PATCH", "/c/1", http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}})
	if resp, body := e.get("/c/1"); body != "vv" {
		t.Fatalf("after the upgraded write: %q %q, want the new version", body, cacheStatus(resp))
	}
}
