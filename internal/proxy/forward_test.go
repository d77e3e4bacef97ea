package proxy_test

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/proxy"
)

// recorder is an upstream that keeps the headers of every request.
type recorder struct {
	mu   sync.Mutex
	seen []http.Header
}

func (rec *recorder) handler(w http.ResponseWriter, r *http.Request) {
	rec.mu.Lock()
	rec.seen = append(rec.seen, r.Header.Clone())
	rec.mu.Unlock()
	fmt.Fprint(w, "ok")
}

func (rec *recorder) last() http.Header {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.seen[len(rec.seen)-1]
}

// hostile are headers a client may send to shape an answer that is then
// stored for everyone. (A method override field makes a GET the sidecar's
// 400: TestOverriddenSafeMethodRefused.)
var hostile = http.Header{
	"X-Original-Url":     {"/admin"},
	"X-Forwarded-Prefix": {"/evil"},
	"X-Forwarded-Port":   {"6666"},
	"X-Forwarded-Server": {"evil"},
	"X-Forwarded-Host":   {"evil.example"},
	"X-Forwarded-Proto":  {"https"},
	"X-Host":             {"evil.example"},
	"X-Tenant":           {"other"},
	"Forwarded":          {"for=6.6.6.6;host=evil.example"},
	"X-Forwarded-For":    {"6.6.6.6"},
	"Traceparent":        {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	"X-Request-Id":       {"req-1"},
	"Accept-Language":    {"de"},
}

// On a cached route, only what the key holds reaches the upstream;
// Forwarded and X-Forwarded-* are replaced as on pass-through, and the
// request id and trace context are the sidecar's, never the client's
// (issue 20 item 7b).
func TestCachedPathForwardsOnlyKeyedHeaders(t *testing.T) {
	for _, tt := range []struct {
		name    string
		all     bool
		reached []string
		dropped []string
	}{
		{name: "keyed (default)", reached: []string{"Accept-Language"},
			dropped: []string{"X-Original-Url", "X-Forwarded-Prefix", "X-Forwarded-Port", "X-Forwarded-Server", "X-Host", "X-Tenant", "Forwarded", "Traceparent"}},
		{name: "forward_headers: all", all: true, reached: []string{"X-Tenant", "X-Original-Url", "Accept-Language"},
			dropped: []string{"Forwarded", "X-Forwarded-Prefix", "X-Forwarded-Port", "X-Forwarded-Server", "Traceparent"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			up := newUpstream(t, rec.handler)
			rt := testRoute{Name: "c", Pattern: "/c/{id}", TTL: time.Minute, ForwardAll: tt.all}
			rt.Key.Headers = []string{"Accept-Language"}
			e := newEnv(t, up, []testRoute{rt})
			for _, path := range []string{"/c/1", "/pass"} { // cached, then pass-through
				hdr := hostile.Clone()
				e.do("GET", path, hdr)
				got := rec.last()
				if path == "/c/1" {
					for _, k := range tt.reached {
						if got.Get(k) != hostile.Get(k) {
							t.Errorf("%s: %s = %q, want it forwarded", path, k, got.Get(k))
						}
					}
					for _, k := range tt.dropped {
						if v := got.Get(k); v != "" {
							t.Errorf("%s: %s = %q reached the upstream", path, k, v)
						}
					}
					if id := got.Get("X-Request-Id"); id == "" || id == hostile.Get("X-Request-Id") {
						t.Errorf("%s: X-Request-Id = %q, want the sidecar's own", path, id)
					}
				}
				// Both paths: the sidecar's own view of the client, never
				// the client's claims.
				if xff := got.Get("X-Forwarded-For"); xff != "127.0.0.1" {
					t.Errorf("%s: X-Forwarded-For = %q, want 127.0.0.1", path, xff)
				}
				if h := got.Get("X-Forwarded-Host"); strings.Contains(h, "evil") {
					t.Errorf("%s: X-Forwarded-Host = %q", path, h)
				}
				if p := got.Get("X-Forwarded-Proto"); p != "http" {
					t.Errorf("%s: X-Forwarded-Proto = %q", path, p)
				}
			}
		})
	}
}

// syncBuffer is a log sink tests can read while handlers write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// An answer that varies on a header the route withheld is not stored under
// that variant: the header is learned, forwarded from then on, and the
// request asked again, so every client gets its own variant. A withheld
// header is logged once per route and name.
func TestVaryOnWithheldHeaderIsLearned(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Vary", "Accept-Language")
		fmt.Fprint(w, "lang="+r.Header.Get("Accept-Language")+" key="+r.Header.Get("X-Api-Key"))
	})
	logs := &syncBuffer{}
	rt := testRoute{Name: "greet", Pattern: "/greet/{id}", TTL: time.Minute}
	e := newEnv(t, up, []testRoute{rt}, func(o *proxy.Options, _ *l1.Store) {
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	for i, lang := range []string{"en", "fr", "en", "fr"} {
		resp, body := e.do("GET", "/greet/1", http.Header{"Accept-Language": {lang}, "X-Api-Key": {"k"}})
		if body != "lang="+lang+" key=" {
			t.Fatalf("request %d (%s): %q %q", i, lang, body, cacheStatus(resp))
		}
	}
	// en: withheld, learned, asked again (2); fr: forwarded (1); then hits.
	if got := up.calls.Load(); got != 3 {
		t.Fatalf("upstream calls = %d, want 3", got)
	}
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	withheld := 0
	for sc.Scan() {
		if strings.Contains(sc.Text(), "not forwarded") && strings.Contains(sc.Text(), "header=X-Api-Key") {
			withheld++
		}
	}
	if withheld != 1 {
		t.Fatalf("X-Api-Key withheld logged %d times, want once:\n%s", withheld, logs.String())
	}
}
