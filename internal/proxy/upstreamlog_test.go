package proxy_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/proxy"
)

// lockedBuffer is a log sink safe for the handler's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the JSON log lines with msg.
func (l *lockedBuffer) lines(t testing.TB, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(l.b.Bytes()), []byte("\n")) {
		var m map[string]any
		if len(line) == 0 {
			continue
		}
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// TestUpstreamFailureLoggedOnEveryPath (issue 22, item 4): a request
// answered 502 because the upstream refused logs one WARN naming its route
// whichever path it took — the cached fill (which logged nothing), the lean
// pass-through, a write through ReverseProxy, and no route at all — and the
// lines are bounded per second, the next one counting those left out.
func TestUpstreamFailureLoggedOnEveryPath(t *testing.T) {
	logs := &lockedBuffer{}
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	refused, _ := url.Parse("http://" + refusedAddr(t))
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
	e := newEnv(t, up, []testRoute{
		{Name: "client", Pattern: "/clients/{id}", Methods: []string{"GET", "PUT"}, TTL: time.Minute},
		{Name: "uncached", Pattern: "/plain"},
	}, func(o *proxy.Options, _ *l1.Store) {
		o.Upstream, o.Now = refused, clock
		o.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	for _, c := range []struct{ method, path, route string }{
		{"GET", "/clients/1", "client"},
		{"GET", "/plain", "uncached"},
		{"PUT", "/clients/1", "client"},
		{"GET", "/elsewhere", "_pass"},
	} {
		resp, _ := e.do(c.method, c.path, nil)
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("%s %s: %d, want 502", c.method, c.path, resp.StatusCode)
		}
		got := logs.lines(t, "upstream failed")
		if len(got) == 0 {
			t.Fatalf("%s %s: 502 without an upstream failure line", c.method, c.path)
		}
		last := got[len(got)-1]
		if last["level"] != "WARN" || last["route"] != c.route || last["path"] != c.path || last["status"] != float64(502) {
			t.Errorf("%s %s: line %v, want WARN route=%s status=502", c.method, c.path, last, c.route)
		}
	}
	// Within one second of the fixed clock: the bound holds.
	for range 20 {
		e.get("/clients/2")
	}
	got := logs.lines(t, "upstream failed")
	if len(got) != 10 {
		t.Fatalf("%d lines within one second, want the bound of 10", len(got))
	}
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	e.get("/clients/2")
	got = logs.lines(t, "upstream failed")
	if s := got[len(got)-1]["suppressed"]; s != float64(14) {
		t.Errorf("first line of the next second: suppressed=%v, want 14", s)
	}
}

// TestWithheldHeaderWarnsOncePerProcess (issue 22, item 4): a withheld
// header that can change an answer (X-Api-Key) is a WARN once per route
// and name in the life of the process — not again after a reload — and
// headers that cannot (User-Agent, Accept, Cache-Control) are no WARN.
func TestWithheldHeaderWarnsOncePerProcess(t *testing.T) {
	logs := &lockedBuffer{}
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	routes := []testRoute{{Name: "client", Pattern: "/clients/{id}", TTL: time.Minute}}
	e := newEnv(t, up, routes, func(o *proxy.Options, _ *l1.Store) {
		o.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	hdr := http.Header{"X-Api-Key": {"k"}, "User-Agent": {"curl/8"}, "Accept": {"*/*"}, "Cache-Control": {"max-age=0"}}
	e.do("GET", "/clients/1", hdr)
	e.h.SetRoutes(compile(t, routes)) // a reload
	e.do("GET", "/clients/2", hdr)

	var warned []string
	for _, l := range logs.lines(t, "request header not forwarded on a cached route; list it in key.headers (or set forward_headers: all) if the upstream needs it") {
		warned = append(warned, l["header"].(string))
	}
	if len(warned) != 1 || warned[0] != "X-Api-Key" {
		t.Errorf("WARNed for %v, want X-Api-Key once", warned)
	}
}
