package cachekey

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// req builds a request the way net/http's server would from a request
// target, so RawPath is set exactly when the wire form needs it.
func req(t testing.TB, method, host, target string, hdr ...string) *http.Request {
	t.Helper()
	u, err := url.ParseRequestURI(target)
	if err != nil {
		t.Fatalf("parse %q: %v", target, err)
	}
	r := &http.Request{Method: method, Host: host, URL: u, Header: http.Header{}}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return r
}

func TestBuildExact(t *testing.T) {
	tests := []struct {
		name   string
		r      *http.Request
		o      *Options
		expect string
	}{
		{"plain", req(t, "GET", "example.com", "/clients/1"), &Options{}, "GET example.com/clients/1"},
		{"nil options", req(t, "GET", "example.com", "/clients/1?x=1", "Accept", "a"), nil, "GET example.com/clients/1"},
		{"chosen query", req(t, "GET", "example.com", "/clients/1?z=9&fields=a"), &Options{Query: []string{"fields"}}, "GET example.com/clients/1?fields=a"},
		{"all query sorted by name, values in order", req(t, "GET", "example.com", "/x?b=2&a=1&a=0"), &Options{AllQuery: true}, "GET example.com/x?a=1&a=0&b=2"},
		{"no chosen query present", req(t, "GET", "example.com", "/x?b=2"), &Options{Query: []string{"a"}}, "GET example.com/x"},
		{"header", req(t, "GET", "example.com", "/clients/1?fields=a", "Accept-Language", "en"),
			&Options{Query: []string{"fields"}, Headers: []string{"Accept-Language"}}, "GET example.com/clients/1?fields=a accept-language=en"},
		{"header absent", req(t, "GET", "example.com", "/x"), &Options{Headers: []string{"accept-language"}}, "GET example.com/x accept-language"},
		{"header empty", req(t, "GET", "example.com", "/x", "Accept-Language", ""), &Options{Headers: []string{"Accept-Language"}}, "GET example.com/x accept-language="},
		{"header lines join", req(t, "GET", "example.com", "/x", "X-T", " a ", "X-T", "b c"), &Options{Headers: []string{"x-t"}}, "GET example.com/x x-t=a,b%20c"},
		{"accept-encoding normalised", req(t, "GET", "example.com", "/x", "Accept-Encoding", "GZIP, br;q=0"), &Options{Headers: []string{"Accept-Encoding"}}, "GET example.com/x accept-encoding=gzip"},
		{"accept-encoding absent", req(t, "GET", "example.com", "/x"), &Options{Headers: []string{"Accept-Encoding"}}, "GET example.com/x accept-encoding=identity"},
		{"head is get", req(t, "HEAD", "Example.COM:8080", "/x"), nil, "GET example.com:8080/x"},
		{"empty method is get", req(t, "", "h", "/x"), nil, "GET h/x"},
		{"post", req(t, "POST", "h", "/x"), nil, "POST h/x"},
		{"odd method escaped", &http.Request{Method: "A B%", Host: "h", URL: &url.URL{Path: "/"}}, nil, "A%20B%25 h/"},
		{"odd host escaped", &http.Request{Method: "GET", Host: "a/b c%", URL: &url.URL{Path: "/"}}, nil, "GET a%2Fb%20c%25/"},
		{"host from url", &http.Request{Method: "GET", URL: &url.URL{Host: "U.example", Path: "/p"}}, nil, "GET u.example/p"},
		{"empty path", &http.Request{Method: "GET", Host: "h", URL: &url.URL{}}, nil, "GET h/"},
		{"asterisk", &http.Request{Method: "OPTIONS", Host: "h", URL: &url.URL{Path: "*"}}, nil, "OPTIONS h*"},
		{"relative path rooted", &http.Request{Method: "GET", Host: "h", URL: &url.URL{Path: "a/b"}}, nil, "GET h/a/b"},
		{"nil url", &http.Request{Method: "GET", Host: "h"}, &Options{AllQuery: true}, "GET h/"},
		{"unreserved decoded", req(t, "GET", "h", "/a%41%7e"), nil, "GET h/aA~"},
		{"reserved kept upper", req(t, "GET", "h", "/a%2fb%3f"), nil, "GET h/a%2Fb%3F"},
		{"sub-delims literal from wire", req(t, "GET", "h", "/a*(b)!"), nil, "GET h/a*(b)!"},
		{"path without raw escapes like EscapedPath", &http.Request{Method: "GET", Host: "h", URL: &url.URL{Path: "/a b*?"}}, nil, "GET h/a%20b%2A%3F"},
		{"query escaping", req(t, "GET", "h", "/x?q=a+b%2Bc&r=%zz&s=%E2%82%AC&t=1,2:3"), &Options{AllQuery: true}, "GET h/x?q=a+b%2Bc&r=%_25zz&s=%E2%82%AC&t=1,2:3"},
		{"reserved kept, unreserved decoded", req(t, "GET", "h", "/x?a=1;b%3b%41%7e=%3D=&c"), &Options{AllQuery: true}, "GET h/x?a=1;b%3BA~%_3D%3D%_3D&c="},
		{"separators in values escaped", req(t, "GET", "h", "/x?a=1%26b%3D2%20c%7Cd", "X-V", "p q=r|s&"),
			&Options{AllQuery: true, Headers: []string{"X-V"}}, "GET h/x?a=1%26b%3D2%20c%7Cd x-v=p%20q%3Dr%7Cs%26"},
		{"bare name and empty segments", req(t, "GET", "h", "/x?&&a&b=&"), &Options{AllQuery: true}, "GET h/x?a=&b="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Build(tt.r, tt.o); got != tt.expect {
				t.Errorf("Build = %q, want %q", got, tt.expect)
			}
		})
	}
}

func TestBuildEquivalence(t *testing.T) {
	all := &Options{AllQuery: true, Headers: []string{"Accept-Language"}}
	tests := []struct {
		name  string
		a, b  *http.Request
		o     *Options
		equal bool
	}{
		{"param order", req(t, "GET", "h", "/x?b=2&a=1"), req(t, "GET", "h", "/x?a=1&b=2"), all, true},
		{"escaped value", req(t, "GET", "h", "/x?a=%31&b=2"), req(t, "GET", "h", "/x?a=1&b=2"), all, true},
		{"escaped name", req(t, "GET", "h", "/x?%61=1"), req(t, "GET", "h", "/x?a=1"), all, true},
		{"escaped chosen name", req(t, "GET", "h", "/x?f%69elds=a"), req(t, "GET", "h", "/x?fields=a"), &Options{Query: []string{"fields"}}, true},
		{"repeated values keep order among others", req(t, "GET", "h", "/x?a=2&b=0&a=1"), req(t, "GET", "h", "/x?b=0&a=2&a=1"), all, true},
		{"escaped hex case", req(t, "GET", "h", "/x?a=%3b"), req(t, "GET", "h", "/x?a=%3B"), all, true},
		{"bare name", req(t, "GET", "h", "/x?a"), req(t, "GET", "h", "/x?a="), all, true},
		{"trailing question mark", req(t, "GET", "h", "/x?"), req(t, "GET", "h", "/x"), all, true},
		{"unchosen param", req(t, "GET", "h", "/x?a=1&utm=3"), req(t, "GET", "h", "/x?a=1"), &Options{Query: []string{"a"}}, true},
		{"host case", req(t, "GET", "EXAMPLE.com", "/x"), req(t, "GET", "example.COM", "/x"), all, true},
		{"hex case", req(t, "GET", "h", "/a%2fb"), req(t, "GET", "h", "/a%2Fb"), all, true},
		{"head and get", req(t, "HEAD", "h", "/x"), req(t, "GET", "h", "/x"), all, true},
		{"header spelling", req(t, "GET", "h", "/x", "accept-language", "en"), req(t, "GET", "h", "/x", "Accept-Language", "en"), all, true},

		// RFC 3986 §6.2.2 never reorders values nor decodes a reserved
		// byte; an upstream may tell these apart (issue 20 item 10, which
		// reversed the "repeated values order" and "bad escape literal"
		// equivalences this table used to pin).
		{"repeated values order", req(t, "GET", "h", "/x?lang=fr&lang=en"), req(t, "GET", "h", "/x?lang=en&lang=fr"), all, false},
		{"bad escape verbatim", req(t, "GET", "h", "/x?q=%zz"), req(t, "GET", "h", "/x?q=%25zz"), all, false},
		{"bad escape case", req(t, "GET", "h", "/x?q=%zz"), req(t, "GET", "h", "/x?q=%ZZ"), all, false},
		{"semicolon is not %3B", req(t, "GET", "h", "/x?a=1;b=2"), req(t, "GET", "h", "/x?a=1%3Bb=2"), all, false},
		{"equals is not %3D", req(t, "GET", "h", "/x?a=b=c"), req(t, "GET", "h", "/x?a=b%3Dc"), all, false},
		{"plus is not %20", req(t, "GET", "h", "/x?a=b+c"), req(t, "GET", "h", "/x?a=b%20c"), all, false},
		{"plus is not %2B", req(t, "GET", "h", "/x?a=b+c"), req(t, "GET", "h", "/x?a=b%2Bc"), all, false},
		{"encoded slash", req(t, "GET", "h", "/a%2Fb"), req(t, "GET", "h", "/a/b"), all, false},
		{"trailing slash", req(t, "GET", "h", "/a/"), req(t, "GET", "h", "/a"), all, false},
		{"path case", req(t, "GET", "h", "/A"), req(t, "GET", "h", "/a"), all, false},
		{"value", req(t, "GET", "h", "/x?a=1"), req(t, "GET", "h", "/x?a=2"), all, false},
		{"name case", req(t, "GET", "h", "/x?A=1"), req(t, "GET", "h", "/x?a=1"), all, false},
		{"amp inside value", req(t, "GET", "h", "/x?a=1%26b%3D2"), req(t, "GET", "h", "/x?a=1&b=2"), all, false},
		{"pair boundary", req(t, "GET", "h", "/x?a=b&c"), req(t, "GET", "h", "/x?a=b%26c"), all, false},
		{"value moves into path", req(t, "GET", "h", "/x%3Fa=1"), req(t, "GET", "h", "/x?a=1"), all, false},
		{"host and path boundary", req(t, "GET", "ab", "/c"), &http.Request{Method: "GET", Host: "a", URL: &url.URL{Path: "/bc"}}, all, false},
		{"method", req(t, "POST", "h", "/x"), req(t, "GET", "h", "/x"), all, false},
		{"header value", req(t, "GET", "h", "/x", "Accept-Language", "en"), req(t, "GET", "h", "/x", "Accept-Language", "fr"), all, false},
		{"header absent vs empty", req(t, "GET", "h", "/x", "Accept-Language", ""), req(t, "GET", "h", "/x"), all, false},
		{"header value mimics query", req(t, "GET", "h", "/x?a=1", "Accept-Language", "en"), req(t, "GET", "h", "/x?a=1%20accept-language%3Den"), all, false},
		{"header space", req(t, "GET", "h", "/x", "Accept-Language", "a b"), req(t, "GET", "h", "/x", "Accept-Language", "a%20b"), all, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ka, kb := Build(tt.a, tt.o), Build(tt.b, tt.o)
			if (ka == kb) != tt.equal {
				t.Errorf("keys %q and %q: equal=%v, want %v", ka, kb, ka == kb, tt.equal)
			}
		})
	}
}

func TestBuildCredentialsHashed(t *testing.T) {
	o := &Options{Headers: []string{"Authorization", "Cookie"}}
	a := Build(req(t, "GET", "h", "/x", "Authorization", "Bearer secret-a", "Cookie", "sid=1"), o)
	a2 := Build(req(t, "GET", "h", "/x", "Authorization", "Bearer secret-a", "Cookie", "sid=1"), o)
	b := Build(req(t, "GET", "h", "/x", "Authorization", "Bearer secret-b", "Cookie", "sid=1"), o)
	none := Build(req(t, "GET", "h", "/x"), o)
	if a != a2 {
		t.Errorf("same credentials, different keys: %q %q", a, a2)
	}
	if a == b {
		t.Errorf("different credentials share key %q", a)
	}
	for _, k := range []string{a, b} {
		if strings.Contains(k, "secret") || strings.Contains(k, "sid") {
			t.Errorf("key %q leaks a credential", k)
		}
		if !strings.Contains(k, " authorization=sha256:") || !strings.Contains(k, " cookie=sha256:") {
			t.Errorf("key %q lacks hashed parts", k)
		}
	}
	if none != "GET h/x authorization cookie" {
		t.Errorf("absent credentials key = %q", none)
	}
	long := strings.Repeat("x", 1000)
	if Build(req(t, "GET", "h", "/x", "Cookie", long+"1"), o) == Build(req(t, "GET", "h", "/x", "Cookie", long+"2"), o) {
		t.Error("long cookies differing at the end share a key")
	}
}

func TestBuildLongKey(t *testing.T) {
	p := "/" + strings.Repeat("seg/", 300)
	r := req(t, "GET", "h", p+"?a="+strings.Repeat("v", 600))
	got := Build(r, &Options{AllQuery: true})
	if want := "GET h" + p + "?a=" + strings.Repeat("v", 600); got != want {
		t.Errorf("long key mangled: %d bytes, want %d", len(got), len(want))
	}
}

func TestBuildManyParams(t *testing.T) {
	var q []string
	for i := 40; i > 0; i-- {
		q = append(q, "p"+string(rune('A'+i%26))+"="+string(rune('a'+i%26)))
	}
	k1 := Build(req(t, "GET", "h", "/x?"+strings.Join(q, "&")), &Options{AllQuery: true})
	for i, j := 0, len(q)-1; i < j; i, j = i+1, j-1 {
		q[i], q[j] = q[j], q[i]
	}
	k2 := Build(req(t, "GET", "h", "/x?"+strings.Join(q, "&")), &Options{AllQuery: true})
	if k1 != k2 {
		t.Errorf("40 params: order changed key\n%s\n%s", k1, k2)
	}
	if strings.Count(k1, "&") != 39 {
		t.Errorf("key %q lost params", k1)
	}
}

func TestBuildAllocs(t *testing.T) {
	r := req(t, "GET", "api.example.com", "/clients/42?lang=en&fields=a,b&utm_source=x", "Accept-Language", "en-US")
	o := &Options{AllQuery: true, Headers: []string{"Accept-Language"}}
	if n := testing.AllocsPerRun(100, func() { _ = Build(r, o) }); n > 1 {
		t.Errorf("Build allocates %v times per call, want 1", n)
	}
}

// TestKeyHost (issue 22, item 9): a route of a single-host service keys on
// one canonical host, or none, whatever Host the client spelled.
func TestKeyHost(t *testing.T) {
	for _, c := range []struct {
		o    Options
		host string
		want string
	}{
		{Options{}, "svc.ns", "GET svc.ns/a"},
		{Options{Host: "svc"}, "svc.ns.svc.cluster.local", "GET svc/a"},
		{Options{Host: "svc"}, "SVC", "GET svc/a"},
		{Options{NoHost: true}, "svc.ns", "GET /a"},
		{Options{NoHost: true, Host: "ignored"}, "x", "GET /a"},
	} {
		r, _ := http.NewRequest(http.MethodGet, "http://"+c.host+"/a", nil)
		if got := Build(r, &c.o); got != c.want {
			t.Errorf("Build(%+v, Host %s) = %q, want %q", c.o, c.host, got, c.want)
		}
	}
}
