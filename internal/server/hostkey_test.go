package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestKeyHostCanonical (issue 22, item 9): clients reaching one Service as
// svc, svc.ns and svc.ns.svc.cluster.local share one entry on a route with
// key.host: svc (one upstream call), the upstream is told that host and
// not the client's spelling, key.host: none keys on no host, and a purge
// by tag still drops the entry; GET /routes shows the choice.
func TestKeyHostCanonical(t *testing.T) {
	var gets atomic.Int64
	var mu sync.Mutex
	var fwdHosts []string
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		mu.Lock()
		fwdHosts = append(fwdHosts, r.Header.Get("X-Forwarded-Host"))
		mu.Unlock()
		fmt.Fprintf(w, "answer for %s", r.URL.Path)
	}))
	t.Cleanup(o.Close)
	r := startReplicaYAML(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, token: secret}
upstream: {url: %s}
cache: {l1: {max_bytes: 1MiB}}
routes:
  - name: client
    path: /clients/{id}
    ttl: 5m
    tags: ["client:{id}"]
    key: {host: Svc}
  - name: anyhost
    path: /any/{id}
    ttl: 5m
    key: {host: none}
`, o.URL))
	getAs := func(host, path string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, r.proxy+path, nil)
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("Cache-Status")
	}
	hosts := []string{"svc", "svc.ns", "svc.ns.svc.cluster.local"}
	getAs(hosts[0], "/clients/1")
	eventually(t, 5*time.Second, "every spelling of the host hits the one entry", func() bool {
		for _, h := range hosts {
			if !strings.Contains(getAs(h, "/clients/1"), "; hit") {
				return false
			}
		}
		return true
	})
	if n := gets.Load(); n != 1 {
		t.Errorf("%d upstream GETs for three spellings of one host, want 1", n)
	}
	mu.Lock()
	if len(fwdHosts) != 1 || fwdHosts[0] != "svc" {
		t.Errorf("upstream saw X-Forwarded-Host %q, want the canonical svc", fwdHosts)
	}
	mu.Unlock()

	getAs("a.example", "/any/1")
	eventually(t, 5*time.Second, "key.host none: another host hits", func() bool {
		return strings.Contains(getAs("b.example", "/any/1"), "; hit")
	})
	mu.Lock()
	if last := fwdHosts[len(fwdHosts)-1]; last != "" {
		t.Errorf("key.host none: upstream saw X-Forwarded-Host %q, want none", last)
	}
	mu.Unlock()

	if code, _, b := r.do(t, http.MethodPost, "admin:/purge?tag=client:1", "Authorization", "Bearer secret"); code != 200 || !strings.Contains(b, `"purged":1`) {
		t.Fatalf("purge by tag: %d %q", code, b)
	}
	if strings.Contains(getAs("svc.ns", "/clients/1"), "; hit") {
		t.Error("a hit after the purge")
	}

	_, _, b := r.do(t, http.MethodGet, "admin:/routes")
	var routes []map[string]any
	if err := json.Unmarshal([]byte(b), &routes); err != nil {
		t.Fatal(err)
	}
	if h := routes[0]["key"].(map[string]any)["host"]; h != "svc" {
		t.Errorf("GET /routes: client key.host %v, want svc", h)
	}
	if h := routes[1]["key"].(map[string]any)["host"]; h != "none" {
		t.Errorf("GET /routes: anyhost key.host %v, want none", h)
	}
}
