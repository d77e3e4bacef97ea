package upreq

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/forward"
	"github.com/sidecache/sidecache/internal/httpcache"
)

func rules(keyed ...string) *forward.Rules {
	return forward.New(forward.Config{Route: "r", Keyed: keyed, Log: slog.New(slog.DiscardHandler),
		Never: func(k string) bool {
			return httpcache.IsHopHeader(k) || k == "Forwarded" || strings.HasPrefix(k, "X-Forwarded-")
		}})
}

func clientRequest() *http.Request {
	in := httptest.NewRequest(http.MethodGet, "http://svc.ns/a%2Fb?x=1&y=2", nil)
	in.RemoteAddr = "192.0.2.1:1234"
	for k, v := range map[string]string{
		"X-Key":            "k",
		"X-Secret":         "s",
		"X-Unkeyed":        "u",
		"Connection":       "X-Secret",
		"X-Request-Id":     "client-id",
		"Via":              "1.1 client",
		"X-Forwarded-For":  "203.0.113.9",
		"X-Forwarded-Host": "evil",
		"Traceparent":      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	} {
		in.Header.Set(k, v)
	}
	return in
}

// The upstream sees what the key holds and what the sidecar writes: the
// keyed header, not the one the client's Connection names nor an unkeyed
// one; the sidecar's own request id and Via, X-Forwarded-For from the
// connection, no trace context of the client's.
func TestGetCarriesWhatTheKeyHolds(t *testing.T) {
	up, _ := url.Parse("http://up:8080")
	tg := Target{Up: up, Rules: rules("X-Key", "X-Secret"), Via: []string{"1.1 sc"}}
	in := clientRequest()
	out := tg.Get(context.Background(), in, in.URL.Path, "x=1")
	h := out.Header
	want := map[string][]string{
		"X-Key":            {"k"},
		"Via":              {"1.1 sc"},
		"X-Forwarded-For":  {"192.0.2.1"},
		"X-Forwarded-Host": {"svc.ns"},
		"User-Agent":       {""},
	}
	for k, v := range want {
		if !slices.Equal(h[k], v) {
			t.Errorf("%s: %q, want %q", k, h[k], v)
		}
	}
	for _, k := range []string{"X-Secret", "X-Unkeyed", "Connection", "Traceparent"} {
		if v, ok := h[k]; ok {
			t.Errorf("%s sent: %q", k, v)
		}
	}
	if id := h.Get("X-Request-Id"); id == "" || id == "client-id" {
		t.Errorf("X-Request-Id %q, want the sidecar's own", id)
	}
	if out.Method != http.MethodGet || out.URL.Host != "up:8080" || out.URL.RawQuery != "x=1" || !strings.HasSuffix(out.URL.EscapedPath(), "/a%2Fb") {
		t.Errorf("request %s %s, want GET http://up:8080/a%%2Fb?x=1", out.Method, out.URL)
	}
	if out.Context() != context.Background() {
		t.Error("the request does not carry the caller's context")
	}
}

// With key.host set the upstream is told the canonical host, or none, not
// the one the client spelled; without a Via the sidecar sends none.
func TestGetHostRule(t *testing.T) {
	up, _ := url.Parse("http://up:8080")
	for _, tc := range []struct {
		key  *cachekey.Options
		want []string
	}{
		{nil, []string{"svc.ns"}},
		{&cachekey.Options{Host: "svc"}, []string{"svc"}},
		{&cachekey.Options{NoHost: true}, nil},
	} {
		tg := Target{Up: up, Rules: rules(), Key: tc.key}
		in := clientRequest()
		out := tg.Get(context.Background(), in, "/other", "")
		if got := out.Header["X-Forwarded-Host"]; !slices.Equal(got, tc.want) {
			t.Errorf("key %+v: X-Forwarded-Host %q, want %q", tc.key, got, tc.want)
		}
		if v, ok := out.Header["Via"]; ok {
			t.Errorf("Via %q sent with none configured", v)
		}
	}
}
