package cachekey

import (
	"net/http"
	"net/url"
	"testing"
)

// checkFrame holds Frame.Key to Build: r's frame, aimed at the path of
// r2 (r but for its URL's path), gives r2's key.
func checkFrame(t *testing.T, r *http.Request, path2, raw2 string, o *Options) {
	t.Helper()
	f := NewFrame(r, o)
	r2 := *r
	u := *r.URL
	u.Path, u.RawPath = path2, raw2
	r2.URL = &u
	if got, want := f.Key(&u), Build(&r2, o); got != want {
		t.Fatalf("Frame.Key(%q, %q) = %q, Build %q", path2, raw2, got, want)
	}
}

// TestFrame: a frame's key for each path is Build's, whatever the method,
// host, query and headers the key holds around it.
func TestFrame(t *testing.T) {
	opts := []*Options{nil, {}, {AllQuery: true}, {Query: []string{"a"}, Headers: []string{"Accept-Language"}},
		{AllQuery: true, Headers: []string{"Accept-Language", "X-Tenant"}, Host: "svc"}, {NoHost: true}}
	reqs := []*http.Request{
		{Method: "GET", Host: "Example.COM:8080", URL: &url.URL{Path: "/users/1", RawQuery: "b=2&a=1"},
			Header: http.Header{"Accept-Language": {"en"}, "X-Tenant": {"a b", "c"}}},
		{Method: "HEAD", Host: "", URL: &url.URL{Host: "h", Path: "/users/x"}},
		{Method: "GET", Host: "h", URL: &url.URL{Path: "/users/x", RawQuery: ""}, Header: http.Header{}},
	}
	paths := [][2]string{{"/users/2", ""}, {"/users/a b", ""}, {"/users/a/b", "/users/a%2Fb"}, {"/users/é?#", ""},
		{"", ""}, {"*", ""}, {"users/rel", ""}, {"/users/%zz", ""}, {"/users/x", "/users/%78"}, {"/users/x", "/bad%"}}
	for _, o := range opts {
		for _, r := range reqs {
			for _, p := range paths {
				checkFrame(t, r, p[0], p[1], o)
			}
		}
	}
}

// FuzzFrame holds Frame.Key to Build on fuzzed paths, queries and headers.
func FuzzFrame(f *testing.F) {
	f.Add("/clients/1", "b=2&a=1", "en", "/clients/2")
	f.Add("/a%2Fb", "a=b+c", " en ", "/a%2Fc")
	f.Add("/x", "", "", "*")
	all := &Options{AllQuery: true, Headers: []string{"Accept-Language"}}
	some := &Options{Query: []string{"a", "b"}, Headers: []string{"Accept-Language"}}
	f.Fuzz(func(t *testing.T, p1, q1, h1, p2 string) {
		r := fuzzReq(p1, q1, h1)
		u2 := fuzzReq(p2, q1, h1).URL
		for _, o := range []*Options{nil, all, some} {
			checkFrame(t, r, u2.Path, u2.RawPath, o)
		}
	})
}
