package admin

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestEveryAnswerIsNoStore: the mux's own 404 and 405 carry
// Cache-Control: no-store like the handlers' answers (docs/admin-api.md).
func TestEveryAnswerIsNoStore(t *testing.T) {
	srv := newServer(t, Options{Token: token, Purger: &recorder{}})
	for _, c := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/nope", http.StatusNotFound},
		{"POST", "/healthz", http.StatusMethodNotAllowed},
		{"GET", "/purge?tag=x", http.StatusMethodNotAllowed},
		{"GET", "/healthz", http.StatusOK},
		{"GET", "/metrics", http.StatusOK},
	} {
		resp, _ := do(t, c.method, srv.URL+c.path, "Bearer "+token)
		if resp.StatusCode != c.code {
			t.Errorf("%s %s: status %d, want %d", c.method, c.path, resp.StatusCode, c.code)
		}
		if got := resp.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s %s: Cache-Control %q, want no-store", c.method, c.path, got)
		}
	}
}

// TestPurgeNotFoundIs404: a selector that names nothing (an unknown route)
// is the caller's mistake, answered 404 with what was not found, never the
// 500 the docs tell operators to retry.
func TestPurgeNotFoundIs404(t *testing.T) {
	p := &recorder{err: fmt.Errorf("purge: route %q: %w", "nosuch", ErrNotFound)}
	srv := newServer(t, Options{Token: token, Purger: p})
	resp, body := do(t, "POST", srv.URL+"/purge?route=nosuch", "Bearer "+token)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("status %d, want 404 (%q)", resp.StatusCode, body)
	}
	if !strings.Contains(body, `no route named "nosuch"`) {
		t.Errorf("body %q does not say what was not found", body)
	}
	if got := resp.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control %q", got)
	}
}
