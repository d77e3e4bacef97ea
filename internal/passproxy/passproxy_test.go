package passproxy_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cachestatus"
	"github.com/sidecache/sidecache/internal/metrics"
	"github.com/sidecache/sidecache/internal/passproxy"
	"github.com/sidecache/sidecache/internal/surrogate"
)

type failed struct {
	route string
	code  int
}

func proxyTo(t *testing.T, up string, logged *[]failed) http.Handler {
	t.Helper()
	u, err := url.Parse(up)
	if err != nil {
		t.Fatal(err)
	}
	tags := surrogate.New(surrogate.Config{Names: []string{"Surrogate-Key"}, Strip: true})
	return passproxy.New(passproxy.Options{
		Upstream: u, Transport: http.DefaultTransport, Timeout: time.Second,
		CurrentTimeout: func() time.Duration { return time.Second },
		MaxHeaderBytes: 1 << 20, Trailers: func(http.Header) {}, Via: []string{"1.1 sc"}, Tags: &tags, Now: time.Now,
		Refused: func(string) {},
		Failed:  func(_ *http.Request, route string, code int, _ error) { *logged = append(*logged, failed{route, code}) },
		Log:     slog.New(slog.DiscardHandler),
	})
}

// TestInfo: a request with its Info gets the route's Cache-Status member
// with the upstream's status, the tag headers stripped and Via added; a
// write's After is told the answer.
func TestInfo(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Forwarded-For") == "" {
			t.Error("no X-Forwarded-For upstream")
		}
		w.Header().Set("Surrogate-Key", "u1")
		w.WriteHeader(http.StatusCreated)
	}))
	defer up.Close()
	var logged []failed
	p := proxyTo(t, up.URL, &logged)
	rm := metrics.New(nil).Route("users")
	var told int
	pi := &passproxy.Info{Route: rm, Start: time.Now(), Status: cachestatus.Member{Fwd: "method"}, In: context.Background(),
		After: func(code int, _ http.Header) { told = code }}
	w := httptest.NewRecorder()
	p.ServeHTTP(w, pi.Request(httptest.NewRequest(http.MethodPost, "/users/1", nil)))
	pi.End()
	if w.Code != http.StatusCreated || told != http.StatusCreated || w.Header().Get("Surrogate-Key") != "" ||
		w.Header().Get("Via") == "" || w.Header().Get("Cache-Status") == "" {
		t.Errorf("%d, told %d, header %v", w.Code, told, w.Header())
	}
}

// TestUpstreamDown: an upstream that refuses the connection is the
// client's 502, logged once under the request's route.
func TestUpstreamDown(t *testing.T) {
	up := httptest.NewServer(http.NotFoundHandler())
	addr := up.URL
	up.Close()
	var logged []failed
	p := proxyTo(t, addr, &logged)
	pi := &passproxy.Info{Route: metrics.New(nil).Route("users"), Start: time.Now(), Status: cachestatus.Member{Fwd: "bypass"}, In: context.Background()}
	w := httptest.NewRecorder()
	p.ServeHTTP(w, pi.Request(httptest.NewRequest(http.MethodGet, "/users/1", nil)))
	if w.Code != http.StatusBadGateway || len(logged) != 1 || logged[0] != (failed{"users", http.StatusBadGateway}) {
		t.Errorf("%d, logged %v", w.Code, logged)
	}
}
