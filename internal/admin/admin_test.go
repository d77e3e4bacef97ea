package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

const token = "s3cret"

// recorder is a Purger that records its calls.
type recorder struct {
	mu    sync.Mutex
	calls []string
	n     int
	err   error
}

func (p *recorder) record(call string) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, call)
	return p.n, p.err
}

func (p *recorder) PurgeTag(_ context.Context, tag string) (int, error) {
	return p.record("tag:" + tag)
}
func (p *recorder) PurgeKey(_ context.Context, key string) (int, error) {
	return p.record("key:" + key)
}
func (p *recorder) PurgeRoute(_ context.Context, route string) (int, error) {
	return p.record("route:" + route)
}
func (p *recorder) PurgeURL(_ context.Context, u *url.URL) (int, error) {
	return p.record("url:" + u.String())
}
func (p *recorder) PurgeAll(context.Context) (AllPurged, error) {
	n, err := p.record("all")
	return AllPurged{Unlinked: n, Complete: true}, err
}

func (p *recorder) got() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls...)
}

type readiness struct {
	ok     bool
	detail map[string]string
}

func (r readiness) Ready() (bool, map[string]string) { return r.ok, r.detail }

func newServer(t *testing.T, opts Options) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(Handler(opts))
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, method, url, auth string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestHealthz(t *testing.T) {
	srv := newServer(t, Options{})
	resp, body := do(t, "GET", srv.URL+"/healthz", "")
	if resp.StatusCode != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("got %d %q, want 200 ok", resp.StatusCode, body)
	}
}

func TestReadyz(t *testing.T) {
	tests := []struct {
		name  string
		ready Readiness
		code  int
		want  map[string]any
	}{
		{"nil is ready", nil, 200, map[string]any{"ready": true}},
		{"ready, l2 degraded", readiness{true, map[string]string{"l2": "degraded", "config": "loaded"}},
			200, map[string]any{"ready": true, "l2": "degraded", "config": "loaded"}},
		{"not ready", readiness{false, map[string]string{"l2": "disabled", "config": "loading"}},
			503, map[string]any{"ready": false, "l2": "disabled", "config": "loading"}},
		// "ready" in detail must not override the real answer.
		{"detail cannot lie", readiness{false, map[string]string{"ready": "yes"}},
			503, map[string]any{"ready": false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, Options{Ready: tt.ready})
			resp, body := do(t, "GET", srv.URL+"/readyz", "")
			if resp.StatusCode != tt.code {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.code)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if len(got) != len(tt.want) {
				t.Errorf("body %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v", k, got[k], v)
				}
			}
		})
	}
}

func TestRoutes(t *testing.T) {
	type route struct {
		Name string `json:"name"`
		Path string `json:"path"`
	}
	srv := newServer(t, Options{Routes: func() any {
		return []route{{"client", "/clients/{id}"}, {"user", "/users/{id}"}}
	}})
	resp, body := do(t, "GET", srv.URL+"/routes", "")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var got []route
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	if len(got) != 2 || got[0].Name != "client" || got[1].Path != "/users/{id}" {
		t.Errorf("routes %+v", got)
	}

	srv = newServer(t, Options{})
	if _, body := do(t, "GET", srv.URL+"/routes", ""); strings.TrimSpace(body) != "[]" {
		t.Errorf("no Routes func: body %q, want []", body)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "sidecache_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Add(3)

	srv := newServer(t, Options{Gatherer: reg})
	resp, body := do(t, "GET", srv.URL+"/metrics", "")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if !strings.Contains(body, "sidecache_test_total 3") {
		t.Errorf("exposition lacks the gatherer's family:\n%s", body)
	}
	// Our own registry only: nothing from the global default registry.
	if strings.Contains(body, "go_goroutines") {
		t.Error("exposition includes the default registry's collectors")
	}
}

// Profiles expose memory contents and cost CPU, and the admin listener is
// reachable from the pod network: /debug/pprof/ is absent unless enabled,
// and when enabled needs the admin token like purge.
func TestPprofOffByDefaultAndBehindToken(t *testing.T) {
	paths := []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline", "/debug/pprof/symbol"}
	t.Run("off by default", func(t *testing.T) {
		srv := newServer(t, Options{Token: token})
		for _, p := range paths {
			if resp, _ := do(t, "GET", srv.URL+p, "Bearer "+token); resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s with the token: %d, want 404", p, resp.StatusCode)
			}
		}
	})
	t.Run("on, without a token configured", func(t *testing.T) {
		srv := newServer(t, Options{PProf: true})
		for _, p := range paths {
			if resp, _ := do(t, "GET", srv.URL+p, ""); resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s: %d, want 403", p, resp.StatusCode)
			}
		}
	})
	t.Run("on, behind the token", func(t *testing.T) {
		srv := newServer(t, Options{Token: token, PProf: true})
		for _, p := range paths {
			resp, _ := do(t, "GET", srv.URL+p, "")
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s without a token: %d, want 401 with a challenge", p, resp.StatusCode)
			}
			if resp, _ := do(t, "GET", srv.URL+p, "Bearer wrong"); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s with a wrong token: %d, want 401", p, resp.StatusCode)
			}
		}
		resp, body := do(t, "GET", srv.URL+"/debug/pprof/", "Bearer "+token)
		if resp.StatusCode != 200 || !strings.Contains(body, "goroutine") {
			t.Fatalf("index: %d %.200q", resp.StatusCode, body)
		}
		resp, body = do(t, "GET", srv.URL+"/debug/pprof/goroutine?debug=1", "Bearer "+token)
		if resp.StatusCode != 200 || !strings.Contains(body, "goroutine profile") {
			t.Fatalf("goroutine profile: %d %.200q", resp.StatusCode, body)
		}
		if resp, _ := do(t, "GET", srv.URL+"/debug/pprof/cmdline", "Bearer "+token); resp.StatusCode != 200 {
			t.Fatalf("cmdline: %d", resp.StatusCode)
		}
	})
}

// /routes shows the compiled routes to anyone who can scrape metrics, and
// changes nothing: only GET (and HEAD) are allowed.
func TestRoutesIsReadOnly(t *testing.T) {
	srv := newServer(t, Options{Token: token, Routes: func() any { return []string{"client"} }})
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		if resp, _ := do(t, m, srv.URL+"/routes", "Bearer "+token); resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s /routes: %d, want 405", m, resp.StatusCode)
		}
	}
}

func TestMethodNotAllowed(t *testing.T) {
	srv := newServer(t, Options{Token: token, Purger: &recorder{}})
	tests := []struct {
		method, path, allow string
	}{
		{"POST", "/healthz", "GET"},
		{"DELETE", "/readyz", "GET"},
		{"POST", "/metrics", "GET"},
		{"GET", "/purge?tag=x", "POST"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			resp, _ := do(t, tt.method, srv.URL+tt.path, "Bearer "+token)
			if resp.StatusCode != 405 {
				t.Fatalf("status %d, want 405", resp.StatusCode)
			}
			if !strings.Contains(resp.Header.Get("Allow"), tt.allow) {
				t.Errorf("Allow %q, want it to contain %s", resp.Header.Get("Allow"), tt.allow)
			}
		})
	}
	if resp, _ := do(t, "GET", srv.URL+"/nope", ""); resp.StatusCode != 404 {
		t.Errorf("unknown path: %d, want 404", resp.StatusCode)
	}
}

func TestPurgeAuth(t *testing.T) {
	tests := []struct {
		name      string
		token     string // configured
		auth      string // sent
		code      int
		challenge string // WWW-Authenticate, "" = must be absent
		calls     int
	}{
		{"no header", token, "", 401, `Bearer realm="sidecache"`, 0},
		{"wrong token", token, "Bearer nope", 401, `Bearer realm="sidecache", error="invalid_token"`, 0},
		{"prefix of token", token, "Bearer s3cre", 401, `Bearer realm="sidecache", error="invalid_token"`, 0},
		{"wrong scheme", token, "Basic " + token, 401, `Bearer realm="sidecache", error="invalid_token"`, 0},
		{"no scheme", token, token, 401, `Bearer realm="sidecache", error="invalid_token"`, 0},
		{"right token", token, "Bearer " + token, 200, "", 1},
		{"scheme case-insensitive", token, "bearer " + token, 200, "", 1},
		{"empty configured token", "", "Bearer ", 403, "", 0},
		{"empty configured token, any header", "", "Bearer anything", 403, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &recorder{n: 4}
			srv := newServer(t, Options{Token: tt.token, Purger: p})
			resp, body := do(t, "POST", srv.URL+"/purge?tag=client:1", tt.auth)
			if resp.StatusCode != tt.code {
				t.Errorf("status %d, want %d (%q)", resp.StatusCode, tt.code, body)
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != tt.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tt.challenge)
			}
			if n := len(p.got()); n != tt.calls {
				t.Errorf("purger called %d times, want %d", n, tt.calls)
			}
			if tt.code == 403 && !strings.Contains(body, "admin.token is not set") {
				t.Errorf("403 body %q does not name the missing setting", body)
			}
		})
	}
}

func TestPurgeSelectors(t *testing.T) {
	tests := []struct {
		query string
		code  int
		call  string // recorded Purger call; "" = none
		body  map[string]any
	}{
		{"tag=client:42", 200, "tag:client:42", map[string]any{"purged": 4.0}},
		{"key=GET%20example/clients/1", 200, "key:GET example/clients/1", map[string]any{"purged": 4.0}},
		{"route=user", 200, "route:user", map[string]any{"purged": 4.0}},
		{"all=1", 200, "all", map[string]any{"all": true, "unlinked": 4.0, "retried": 0.0, "complete": true}},
		{"all=true", 200, "all", map[string]any{"all": true, "unlinked": 4.0, "retried": 0.0, "complete": true}},
		{"", 400, "", nil},
		{"all=0", 400, "", nil},
		{"all=yes", 400, "", nil},
		{"tag=", 400, "", nil},
		{"tag", 400, "", nil},
		{"tag=a&tag=b", 400, "", nil},
		{"tag=a&key=b", 400, "", nil},
		{"route=user&all=1", 400, "", nil},
		{"other=1", 400, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			p := &recorder{n: 4}
			srv := newServer(t, Options{Token: token, Purger: p})
			resp, body := do(t, "POST", srv.URL+"/purge?"+tt.query, "Bearer "+token)
			if resp.StatusCode != tt.code {
				t.Fatalf("status %d, want %d (%q)", resp.StatusCode, tt.code, body)
			}
			calls := p.got()
			if tt.call == "" {
				if len(calls) != 0 {
					t.Errorf("purger called: %v", calls)
				}
				return
			}
			if len(calls) != 1 || calls[0] != tt.call {
				t.Errorf("calls %v, want [%s]", calls, tt.call)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if len(got) != len(tt.body) {
				t.Errorf("body %v, want %v", got, tt.body)
			}
			for k, v := range tt.body {
				if got[k] != v {
					t.Errorf("%s = %v, want %v", k, got[k], v)
				}
			}
		})
	}
}

func TestPurgeErrors(t *testing.T) {
	t.Run("purger error is generic", func(t *testing.T) {
		var logs bytes.Buffer
		p := &recorder{err: errors.New("l2: del: dial tcp 10.0.0.7:6379: connection refused")}
		srv := newServer(t, Options{
			Token: token, Purger: p,
			Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		})
		resp, body := do(t, "POST", srv.URL+"/purge?tag=x", "Bearer "+token)
		if resp.StatusCode != 500 {
			t.Fatalf("status %d, want 500", resp.StatusCode)
		}
		if strings.Contains(body, "10.0.0.7") || strings.Contains(body, "l2") {
			t.Errorf("internals leaked to client: %q", body)
		}
		if !strings.Contains(logs.String(), "10.0.0.7") {
			t.Errorf("detail not logged: %q", logs.String())
		}
	})
	t.Run("no purger", func(t *testing.T) {
		srv := newServer(t, Options{Token: token})
		if resp, _ := do(t, "POST", srv.URL+"/purge?tag=x", "Bearer "+token); resp.StatusCode != 501 {
			t.Fatalf("status %d, want 501", resp.StatusCode)
		}
		// Unauthenticated callers do not learn that purge is unwired.
		if resp, _ := do(t, "POST", srv.URL+"/purge?tag=x", ""); resp.StatusCode != 401 {
			t.Fatalf("unauthenticated: status %d, want 401", resp.StatusCode)
		}
	})
}

func TestNotOnDefaultMux(t *testing.T) {
	// Handler must not add its routes to http.DefaultServeMux.
	Handler(Options{})
	for _, path := range []string{"/metrics", "/healthz", "/purge"} {
		req := httptest.NewRequest("GET", path, nil)
		if _, pattern := http.DefaultServeMux.Handler(req); pattern != "" {
			t.Errorf("%s registered on DefaultServeMux as %q", path, pattern)
		}
	}
}

// A refused call to a token-gated endpoint is logged, as NGINX's
// auth_basic logs a mismatch to its error log: a token being guessed, or
// a rotated token some script still sends, is otherwise invisible (the
// admin listener has no access log). The line names the peer, the call
// and why; never what was presented.
func TestRefusedCallsLogged(t *testing.T) {
	var logs bytes.Buffer
	srv := newServer(t, Options{Token: token, Purger: &recorder{}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	do(t, "POST", srv.URL+"/purge?tag=client:1", "Bearer guess-1")
	do(t, "GET", srv.URL+"/cache?url=http://a/b", "")
	do(t, "POST", srv.URL+"/purge?tag=client:1", "Bearer "+token)
	out := logs.String()
	if n := strings.Count(out, `msg="admin: unauthorized"`); n != 2 {
		t.Fatalf("%d refused calls logged, want 2:\n%s", n, out)
	}
	for _, want := range []string{"peer=127.0.0.1", "path=/purge", "path=/cache", "why=invalid", "why=missing"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "guess-1") {
		t.Errorf("log holds the presented token:\n%s", out)
	}
}
