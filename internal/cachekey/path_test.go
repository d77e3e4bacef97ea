package cachekey

import (
	"net/http"
	"net/url"
	"testing"
)

// Path reads back the path of every key Build writes, as URL.Path holds it.
func TestPathReadsBackBuild(t *testing.T) {
	opts := &Options{AllQuery: true, Headers: []string{"Accept-Language"}}
	for _, raw := range []string{
		"http://example.com/clients/1?fields=a",
		"http://Example.COM:8080/a%2Fb/c%20d?x=1&y=2",
		"http://example.com/",
		"http://example.com/%7Euser/x",
		"http://example.com/p/with%3Fquestion",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		r := &http.Request{Method: http.MethodGet, URL: u, Host: u.Host, Header: http.Header{"Accept-Language": {"en"}}}
		key := WithVary(Build(r, opts), []string{"Accept-Encoding"}, r.Header, "gzip")
		got, ok := Path(key)
		if !ok || got != u.Path {
			t.Errorf("Path(%q) = %q, %v; want %q", key, got, ok, u.Path)
		}
	}
	for _, key := range []string{"", "GET", "GET host", "OPTIONS *"} {
		if p, ok := Path(key); ok {
			t.Errorf("Path(%q) = %q, ok; want not ok", key, p)
		}
	}
	if p, ok := Path("GET /no/host"); !ok || p != "/no/host" {
		t.Errorf("Path of a key without host = %q, %v", p, ok)
	}
}
