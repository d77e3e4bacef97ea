package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// underscoreConfig: pass-through for everything else, a cached route, and
// one keyed on X-Tenant.
const underscoreConfig = `
listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
  token: secret
upstream:
  url: %s
  timeout: 5s
routes:
  - name: client
    path: /clients/{id:[1-9][0-9]*}
    ttl: 5m
  - name: tenant
    path: /t/{id}
    ttl: 5m
    forward_headers: all
    key:
      headers: [X-Tenant]
`

// A CGI-style upstream (WSGI, PHP, Rack) reads X_Forwarded_For as
// HTTP_X_FORWARDED_FOR, so a client's underscore spelling beside the
// sidecar's own X-Forwarded-For spoofs its address (and X-Forwarded_Host
// its host, X_Tenant a keyed tenant). No path may forward such a spelling
// of a field the sidecar writes, strips or keys on; other underscore
// names go on. On the old code the lean and ReverseProxy pass-through
// forwarded them all.
func TestUnderscoreSpellingsNeverForwarded(t *testing.T) {
	up := newSeen(t)
	rep := startReplicaYAML(t, fmt.Sprintf(underscoreConfig, up.URL))
	spoof := []string{
		"X_Forwarded_For", "6.6.6.6", "X-Forwarded_Host", "evil.example", "x_real_ip", "6.6.6.6",
		"X_FORWARDED_PROTO", "https", "X_Request_Id", "r", "If_None_Match", `"x"`,
		"X_Tenant", "t2", "X_Custom_Thing", "kept",
	}
	for _, tc := range []struct {
		name, method, path string
		all                bool // forwards unkeyed fields
	}{
		{"lean pass-through", "GET", "/other", true},
		{"ReverseProxy pass-through", "POST", "/other", true},
		{"cached fill", "GET", "/clients/7", false},
		{"keyed cached fill, forward_headers all", "GET", "/t/1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := up.calls.Load()
			if code, _, _ := rep.do(t, tc.method, tc.path, spoof...); code != http.StatusOK || up.calls.Load() != calls+1 {
				t.Fatalf("%d, %d upstream calls; want 200 from one", code, up.calls.Load()-calls)
			}
			h := up.header()
			for k, vs := range h {
				if strings.Contains(k, "_") && !strings.EqualFold(k, "X_Custom_Thing") {
					t.Errorf("upstream received %s: %q", k, vs)
				}
			}
			if got := h.Get("X_Custom_Thing"); tc.all && got != "kept" {
				t.Errorf("X_Custom_Thing %q at the upstream, want it forwarded (only reserved spellings are dropped)", got)
			}
			if got := h.Values("X-Forwarded-For"); len(got) != 1 || got[0] != "127.0.0.1" {
				t.Errorf("X-Forwarded-For %q, want the client's address alone", got)
			}
		})
	}
}
