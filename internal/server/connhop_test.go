package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// tenantOrigin answers as a multi-tenant app does, from the X-Tenant it
// received: GET /t/{id} and the bulk GET /users?ids=… (one element per
// id), each naming the tenant ("" for none).
func tenantOrigin(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant := r.Header.Get("X-Tenant")
		w.Header().Set("Content-Type", "application/json")
		if ids := r.URL.Query().Get("ids"); r.URL.Path == "/users" && ids != "" {
			var out []map[string]string
			for _, id := range strings.Split(ids, ",") {
				out = append(out, map[string]string{"id": id, "tenant": tenant})
			}
			_ = json.NewEncoder(w).Encode(out)
			return
		}
		fmt.Fprintf(w, `{"path":%q,"tenant":%q}`, r.URL.Path, tenant)
	}))
	t.Cleanup(s.Close)
	return s
}

const tenantConfig = `
listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
  token: secret
upstream:
  url: %s
  timeout: 2s
cache:
  l1:
    max_bytes: 16MiB
routes:
  - name: item
    path: /t/{id}
    ttl: 5m
    key:
      headers: [X-Tenant]
  - name: user
    path: /users/{id}
    ttl: 5m
    key:
      headers: [X-Tenant]
    batch:
      path: /users
      param: ids
      max_size: 10
      max_wait: 1ms
      id_field: id
  - name: users
    path: /users
    split:
      param: ids
      route: user
`

// A field the client's Connection names is this hop's alone (RFC 9110
// §7.6.1): the upstream never receives it, so the cache key and the
// batch group must not hold it either. A client that names a keyed header
// in Connection gets the answer made without it, stored (if at all) as
// the answer for its absence, never under the key of the value it sent:
// else that answer, made for no tenant, is every later tenant-t1 client's
// hit (probe h1, D1, on every cached path: per key, batch, split).
func TestConnectionNamedKeyedHeaderPoisonsNoKey(t *testing.T) {
	r := startReplicaYAML(t, fmt.Sprintf(tenantConfig, tenantOrigin(t).URL))
	for _, tc := range []struct{ name, path, want string }{
		{"per key", "/t/1", `"tenant":"t1"`},
		{"batch", "/users/2", `"tenant":"t1"`},
		{"split", "/users?ids=3,4", `"tenant":"t1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, conn := range []string{"X-Tenant", "close, x-tenant"} {
				code, _, b := r.do(t, http.MethodGet, tc.path, "X-Tenant", "t1", "Connection", conn)
				if code != 200 || !strings.Contains(b, `"tenant":""`) {
					t.Fatalf("Connection: %s: %d %s, want the answer made without X-Tenant", conn, code, b)
				}
			}
			// The tenant's own request, twice: a fill then a hit, each
			// made for t1.
			for i := range 2 {
				code, h, b := r.do(t, http.MethodGet, tc.path, "X-Tenant", "t1")
				if code != 200 || !strings.Contains(b, tc.want) || strings.Contains(b, `"tenant":""`) {
					t.Fatalf("request %d for tenant t1: %d %s (%s), want only %s", i, code, b, h.Get("Cache-Status"), tc.want)
				}
			}
		})
	}
}
