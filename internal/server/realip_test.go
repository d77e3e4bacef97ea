package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// realIPConfig: pass-through, a cached route, one forwarding all fields, a
// batch route (forwarding all) with its split list, a large-body route and
// websocket upgrades.
const realIPConfig = `
listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
  token: secret
upstream:
  url: %s
  timeout: 5s
  allow_upgrades: [websocket]
cache:
  max_body_bytes: 1KiB
routes:
  - name: client
    path: /clients/{id:[1-9][0-9]*}
    ttl: 5m
  - name: all
    path: /t/{id}
    ttl: 5m
    forward_headers: all
  - name: big
    path: /big/{id}
    ttl: 5m
  - name: user
    path: /users/{id}
    ttl: 5m
    forward_headers: all
    batch: {path: /users, param: ids, id_field: id}
  - name: users-list
    methods: [GET]
    path: /users
    split: {param: ids, route: user}
`

// A client's X-Real-Ip (NGINX's proxy_set_header X-Real-IP $remote_addr,
// which applications behind NGINX trust as the client's address) never
// reaches the upstream: the sidecar writes its own, the peer it also puts
// in X-Forwarded-For, on every path, and drops the other address claims
// (True-Client-Ip, X-Client-Ip, ...). On the old code pass-through and
// forward_headers: all routes forwarded X-Real-Ip: 6.6.6.6 as sent, and a
// batch's bulk call carried the opener's.
func TestClientAddressClaimsReplaced(t *testing.T) {
	var (
		mu   sync.Mutex
		last http.Header
	)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		last = r.Header.Clone()
		mu.Unlock()
		switch {
		case r.URL.Path == "/users":
			w.Header().Set("Content-Type", "application/json")
			var ids []string
			for id := range strings.SplitSeq(r.URL.Query().Get("ids"), ",") {
				ids = append(ids, `{"id":`+id+`}`)
			}
			io.WriteString(w, "["+strings.Join(ids, ",")+"]")
		case strings.HasPrefix(r.URL.Path, "/big/"):
			io.WriteString(w, strings.Repeat("b", 4096))
		default:
			io.WriteString(w, "ok")
		}
	}))
	t.Cleanup(up.Close)
	rep := startReplicaYAML(t, fmt.Sprintf(realIPConfig, up.URL))
	spoof := []string{
		"X-Real-Ip", "6.6.6.6", "True-Client-Ip", "6.6.6.6", "X-Client-Ip", "6.6.6.6",
		"X-Cluster-Client-Ip", "6.6.6.6", "Cf-Connecting-Ip", "6.6.6.6", "Fastly-Client-Ip", "6.6.6.6",
		"True_Client_Ip", "6.6.6.6",
		// The second prober's: read by Rails (Client-Ip), PHP, Envoy;
		// X-Forwarded-Port beside the rewritten X-Forwarded-Proto.
		"Client-Ip", "6.6.6.6", "X-Originating-Ip", "6.6.6.6", "X-Remote-Addr", "6.6.6.6",
		"Forwarded-For", "6.6.6.6", "X-Envoy-External-Address", "6.6.6.6", "X-Forwarded-Port", "6.6.6.6",
	}
	for _, tc := range []struct {
		name, method, path string
		hdr                []string
	}{
		{"lean pass-through", "GET", "/other", nil},
		{"ReverseProxy pass-through", "POST", "/other", nil},
		{"upgrade", "GET", "/ws", []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13"}},
		{"cached fill", "GET", "/clients/7", nil},
		{"cached fill, forward_headers all", "GET", "/t/1", nil},
		{"large-body stream", "GET", "/big/1", nil},
		{"batch", "GET", "/users/1", nil},
		{"split", "GET", "/users?ids=2,3", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			last = nil
			mu.Unlock()
			if code, _, _ := rep.do(t, tc.method, tc.path, append(tc.hdr, spoof...)...); code != http.StatusOK {
				t.Fatalf("%d, want 200", code)
			}
			mu.Lock()
			h := last
			mu.Unlock()
			if h == nil {
				t.Fatal("no upstream call")
			}
			if got := h.Values("X-Real-Ip"); len(got) != 1 || got[0] != "127.0.0.1" {
				t.Errorf("X-Real-Ip %q, want the peer (127.0.0.1) alone", got)
			}
			if got := h.Values("X-Forwarded-For"); len(got) != 1 || got[0] != "127.0.0.1" {
				t.Errorf("X-Forwarded-For %q, want the peer alone", got)
			}
			for k, vs := range h {
				if strings.Contains(strings.Join(vs, ","), "6.6.6.6") {
					t.Errorf("upstream received %s: %q", k, vs)
				}
			}
		})
	}
}
