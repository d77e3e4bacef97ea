package lean_test

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"

	"github.com/sidecache/sidecache/internal/lean"
)

// What reaches the upstream is what ReverseProxy with SetURL and
// SetXForwarded sends over http.Transport (RFC 9110 §7.6.1 for the
// hop-by-hop fields), checked as the upstream's own server parses it.
func TestRequestWriting(t *testing.T) {
	type seen struct {
		uri, host string
		h         http.Header
	}
	got := make(chan seen, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.RequestURI, r.Host, r.Header.Clone()}
	}))
	t.Cleanup(up.Close)

	tests := []struct {
		name   string
		base   string // appended to the upstream's URL
		target string
		header http.Header
		tls    bool
		uri    string
		want   http.Header // values, or nil for a field that must be absent
	}{
		{
			name: "hop-by-hop and Connection-named fields dropped", target: "/x",
			header: http.Header{
				"Connection": {"X-Secret, close"}, "X-Secret": {"s"}, "Keep-Alive": {"timeout=5"},
				"Proxy-Connection": {"keep-alive"}, "Proxy-Authorization": {"Basic eA=="},
				"Upgrade": {"websocket"}, "Trailer": {"X-T"}, "X-Kept": {"k"},
			},
			uri: "/x",
			want: http.Header{"X-Secret": nil, "Keep-Alive": nil, "Proxy-Connection": nil,
				"Proxy-Authorization": nil, "Upgrade": nil, "Trailer": nil, "X-Kept": {"k"}},
		},
		{
			name: "Te: trailers kept alone", target: "/x", header: http.Header{"Te": {"deflate, trailers"}},
			uri: "/x", want: http.Header{"Te": {"trailers"}},
		},
		{
			name: "Te without trailers dropped", target: "/x", header: http.Header{"Te": {"deflate"}},
			uri: "/x", want: http.Header{"Te": nil},
		},
		{
			name: "X-Forwarded-* and Forwarded replaced from the connection", target: "/x",
			header: http.Header{"X-Forwarded-For": {"6.6.6.6"}, "X-Forwarded-Host": {"evil"},
				"X-Forwarded-Proto": {"https"}, "Forwarded": {"for=6.6.6.6"}},
			uri: "/x",
			want: http.Header{"X-Forwarded-For": {"192.0.2.1"}, "X-Forwarded-Host": {"example.com"},
				"X-Forwarded-Proto": {"http"}, "Forwarded": nil},
		},
		{
			name: "https client", target: "/x", tls: true,
			uri: "/x", want: http.Header{"X-Forwarded-Proto": {"https"}},
		},
		{
			name: "no User-Agent: none added", target: "/x",
			uri: "/x", want: http.Header{"User-Agent": nil},
		},
		{
			name: "empty User-Agent: none sent", target: "/x", header: http.Header{"User-Agent": {""}},
			uri: "/x", want: http.Header{"User-Agent": nil},
		},
		{
			name: "two User-Agents: the first", target: "/x", header: http.Header{"User-Agent": {"a/1", "b/2"}},
			uri: "/x", want: http.Header{"User-Agent": {"a/1"}},
		},
		{
			// The sidecar answers 100-continue itself (httpcache.IsExpect).
			name: "Expect not sent", target: "/x", header: http.Header{"Expect": {"100-continue"}},
			uri: "/x", want: http.Header{"Expect": nil},
		},
		{
			name: "CR LF in a value cannot start a field", target: "/x",
			header: http.Header{"X-A": {"a\r\nX-Injected: 1"}},
			uri:    "/x", want: http.Header{"X-A": {"a  X-Injected: 1"}, "X-Injected": nil},
		},
		{
			name: "escaped path and query kept", target: "/a%2Fb?q=1&r",
			uri: "/a%2Fb?q=1&r", want: http.Header{},
		},
		{
			name: "empty query kept", target: "/x?",
			uri: "/x?", want: http.Header{},
		},
		{
			name: "upstream path and query joined", base: "/api?k=v", target: "/x?q=1",
			uri: "/api/x?k=v&q=1", want: http.Header{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, _ := url.Parse(up.URL + tc.base)
			cl := lean.New(u, 5e9, 0, 0)
			r := httptest.NewRequest("GET", tc.target, nil)
			for k, vs := range tc.header {
				r.Header[k] = vs
			}
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			resp, c, err := cl.RoundTrip(r.Context(), r, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			c.Close()
			s := <-got
			if s.uri != tc.uri || s.host != u.Host {
				t.Errorf("request-target %q Host %q, want %q %q", s.uri, s.host, tc.uri, u.Host)
			}
			for k, want := range tc.want {
				if vs, ok := s.h[k]; want == nil && ok {
					t.Errorf("%s: %q forwarded", k, vs)
				} else if want != nil && !slices.Equal(vs, want) {
					t.Errorf("%s: %q, want %q", k, vs, want)
				}
			}
		})
	}
}
