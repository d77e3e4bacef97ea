package conformance

import (
	"net/http"
	"testing"
	"time"
)

// RFC 9110 §9.3.2 and RFC 9111 §4: a HEAD to a cached route is answered
// from the stored GET response, header only; a HEAD miss is fetched with a
// GET, so the answer can be stored for both methods. The sidecar never
// sends HEAD upstream on the cached path, so RFC 9111 §4.3.5 (freshening
// stored responses with a HEAD's answer) has nothing to act on: a stale
// entry is freshened by a conditional GET (§4.3.4) for a HEAD as for a GET.
func TestHead(t *testing.T) {
	method := func(want string) func(*testing.T, Result) {
		return func(t *testing.T, r Result) {
			if got := r.Origin[len(r.Origin)-1].Method; got != want {
				t.Errorf("origin saw %s, want %s", got, want)
			}
		}
	}
	emptyBody := func(t *testing.T, r Result) {
		if r.Body != "" {
			t.Errorf("HEAD answered with a body %q", r.Body)
		}
		if got := r.Header.Get("Content-Length"); got != "6" {
			t.Errorf("Content-Length %q, want the GET's 6", got)
		}
	}
	fresh := []Resp{{Header: []string{"Cache-Control", "max-age=60", "ETag", `"v1"`}}, {Status: 304}}
	runTable(t, []Case{
		{Name: "HEAD after GET: from the stored GET response", Route: originMode, Origin: fresh,
			Steps: []Step{
				{Fetch: true},
				{After: 5 * time.Second, Method: http.MethodHead, Age: "5", CacheStatus: "hit", Headers: []string{"ETag", `"v1"`}, Check: emptyBody},
			}},
		{Name: "HEAD miss: fetched with GET and stored for the GET after it", Route: originMode, Origin: fresh,
			Steps: []Step{
				{Method: http.MethodHead, Fetch: true, Check: method(http.MethodGet)},
				{Body: "body-1", CacheStatus: "hit"},
			}},
		{Name: "HEAD on a stale entry: revalidated with a conditional GET", Route: originMode, Origin: fresh,
			Steps: []Step{
				{Fetch: true},
				{After: 61 * time.Second, Method: http.MethodHead, Fetch: true, Cond: `If-None-Match: "v1"`, Check: method(http.MethodGet)},
				{Body: "body-1", CacheStatus: "hit"},
			}},
		{Name: "HEAD with If-None-Match: 304 from the stored entry", Route: originMode, Origin: fresh,
			Steps: []Step{{Fetch: true}, {Method: http.MethodHead, Header: []string{"If-None-Match", `"v1"`}, Status: 304}}},
		{Name: "route mode: the same", Route: "ttl: 60s", Origin: fresh,
			Steps: []Step{{Fetch: true}, {Method: http.MethodHead, CacheStatus: "hit", Check: emptyBody}}},
	})
}
