package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHeadOnGetRoute (issue 22, item 8): a route listing only GET answers
// HEAD from the GET entry, as README says, instead of passing it through
// as if no route matched.
func TestHeadOnGetRoute(t *testing.T) {
	o := newOrigin(t)
	r := startReplicaYAML(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstream: {url: %s}
cache: {l1: {max_bytes: 1MiB}}
routes:
  - name: client
    methods: [GET]
    path: /clients/{id}
    ttl: 5m
`, o.URL))
	r.get(t, "/clients/1")
	var status string
	eventually(t, 5*time.Second, "HEAD answered from the GET entry", func() bool {
		code, h, b := r.do(t, http.MethodHead, "/clients/1")
		if code != http.StatusOK || b != "" {
			t.Fatalf("HEAD: %d %q", code, b)
		}
		status = h.Get("Cache-Status")
		if strings.Contains(status, "detail=no-route") {
			t.Fatalf("HEAD on a GET route: Cache-Status %q, want it served by the route", status)
		}
		return strings.Contains(status, "; hit")
	})
	if n := o.gets.Load(); n != 1 {
		t.Errorf("origin saw %d GETs, want 1 (the HEAD is a hit)", n)
	}
}
