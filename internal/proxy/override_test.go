package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// frameworkMethod is the method an app applies r as, read as frameworks
// read it: a method override field on any method (the middleware Flask's
// documentation gives; Express's method-override and ASP.NET Core on a
// POST), under any spelling a CGI-style stack reads as it; a POST's
// _method from its query (Laravel, Symfony) or its form body (Rails,
// Laravel, Symfony, Spring); and the method upper-cased (Werkzeug).
func frameworkMethod(r *http.Request) string {
	m := strings.ToUpper(r.Method)
	for k, vs := range r.Header {
		n := strings.ToUpper(strings.ReplaceAll(k, "_", "-"))
		if (n == "X-HTTP-METHOD-OVERRIDE" || n == "X-HTTP-METHOD" || n == "X-METHOD-OVERRIDE") && len(vs) > 0 {
			return strings.ToUpper(vs[0])
		}
	}
	if m == http.MethodPost {
		if err := r.ParseForm(); err == nil && r.Form.Get("_method") != "" {
			return strings.ToUpper(r.Form.Get("_method"))
		}
	}
	return m
}

// TestMethodOverrideWritesInvalidate: a write the app applies as PATCH
// though its request line says otherwise — POST with a method override
// field (three names, an underscore spelling), POST with _method in its
// query or form body (every Rails edit form) — must drop the write
// route's invalidate tags, not only its URI: /clients/5/summary, tagged
// client:5 under another URI, was served its pre-write version after
// each (the write routes were matched by the request line's method
// alone). Each case writes a resource of its own. (A lower-case patch is
// refused: TestMethodCaseRefused.)
func TestMethodOverrideWritesInvalidate(t *testing.T) {
	var mu sync.Mutex
	ver := map[string]int{} // by client id
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		m := frameworkMethod(r)
		id := strings.Split(r.URL.Path, "/")[2]
		mu.Lock()
		defer mu.Unlock()
		switch {
		case m == http.MethodPatch && r.URL.Path == "/clients/"+id:
			ver[id]++
			w.WriteHeader(http.StatusNoContent)
		case m == http.MethodGet || m == http.MethodHead:
			fmt.Fprintf(w, "%s v%d", r.URL.Path, ver[id])
		default:
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
	})
	summary := testRoute{Name: "client-summary", Pattern: "/clients/{id}/summary", TTL: time.Minute, Tags: []string{"client:{id}"}}
	write := testRoute{Name: "client-write", Methods: []string{"PATCH", "PUT", "DELETE"}, Pattern: "/clients/{id}", Invalidate: []string{"client:{id}"}}
	e := newEnv(t, up, []testRoute{clientRoute, summary, write}, withL1Invalidator)
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	for i, tc := range []struct {
		name, method, path, body string
		hdr                      http.Header
	}{
		{"POST X-HTTP-Method-Override", "POST", "/clients/5", "", http.Header{"X-Http-Method-Override": {"PATCH"}}},
		{"POST X-HTTP-Method", "POST", "/clients/5", "", http.Header{"X-Http-Method": {"PATCH"}}},
		{"POST X-Method-Override", "POST", "/clients/5", "", http.Header{"X-Method-Override": {"patch"}}},
		{"POST X_HTTP_Method_Override", "POST", "/clients/5", "", http.Header{"X_http_method_override": {"PATCH"}}},
		{"POST ?_method=PATCH", "POST", "/clients/5?_method=PATCH", "", nil},
		{"POST form _method=patch", "POST", "/clients/5", "_method=patch&name=x", form},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprint(i + 1) // a resource of its own
			summary := "/clients/" + id + "/summary"
			for i := range 2 {
				if _, b := e.get(summary); b != summary+" v0" {
					t.Fatalf("read %d before the write: %q, want %q", i, b, summary+" v0")
				}
			}
			req, err := http.NewRequest(tc.method, e.front.URL+strings.Replace(tc.path, "/5", "/"+id, 1), strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, vs := range tc.hdr {
				req.Header[k] = vs
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				t.Fatalf("write: %d, want the origin's 204 (applied as PATCH)", resp.StatusCode)
			}
			want := summary + " v1"
			if r, b := e.get(summary); b != want {
				t.Errorf("read after the acknowledged write: %q (%s), want %q", b, r.Header.Get("Cache-Status"), want)
			}
		})
	}
}

// TestOverriddenSafeMethodRefused: a GET or HEAD with a method override
// field naming a write is refused 400 unsent, on every path: behind a
// cookie (a bypass, which forwarded the field, so the app applied the
// write while the sidecar, taking it for a read, dropped nothing), on the
// cached path, on no route. An override naming GET is an ordinary read.
func TestOverriddenSafeMethodRefused(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s as %s", r.URL.Path, frameworkMethod(r))
	})
	e := newEnv(t, up, []testRoute{clientRoute}, withL1Invalidator)
	for _, tc := range []struct {
		method, path string
		hdr          http.Header
	}{
		{http.MethodGet, "/clients/7", http.Header{"X-Http-Method-Override": {"DELETE"}, "Cookie": {"sid=a"}}},
		{http.MethodGet, "/clients/7", http.Header{"X-Http-Method-Override": {"DELETE"}}},
		{http.MethodHead, "/clients/7", http.Header{"X-Http-Method": {"patch"}}},
		{http.MethodGet, "/elsewhere", http.Header{"X_HTTP_Method_Override": {"PUT"}}},
	} {
		r, b := e.do(tc.method, tc.path, tc.hdr)
		if r.StatusCode != http.StatusBadRequest || !strings.Contains(r.Header.Get("Cache-Status"), "detail=method-override") {
			t.Errorf("%s %s %v: %d %q (%s), want the sidecar's 400", tc.method, tc.path, tc.hdr, r.StatusCode, b, r.Header.Get("Cache-Status"))
		}
	}
	if n := up.calls.Load(); n != 0 {
		t.Fatalf("upstream calls %d, want 0: a refused request is not sent", n)
	}
	if _, b := e.do(http.MethodGet, "/clients/7", http.Header{"X-Http-Method-Override": {"get"}}); b != "/clients/7 as GET" {
		t.Fatalf("GET overridden as GET: %q, want the read", b)
	}
}
