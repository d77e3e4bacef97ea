package proxy_test

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/demo"
	"github.com/sidecache/sidecache/internal/route"
)

// demoOrigins are the two upstreams the integration tests run against
// (issue 24 item 5): today's demo, and the demo answering as a common
// framework's defaults would (Express + compression(): Vary:
// Accept-Encoding, gzip over 1 KiB, weak ETags, lenient routes and IDs).
var demoOrigins = []struct {
	name      string
	framework bool
}{{"demo", false}, {"framework", true}}

// demoEnv is the sidecar in front of a demo: the user batch route, its
// split list and the client route.
func demoEnv(t *testing.T, framework bool) (*env, *demo.Server) {
	d := demo.New(demo.Options{Framework: framework, QueryTime: -1, PerRowTime: -1})
	up := &upstream{Server: httptest.NewServer(d)}
	t.Cleanup(up.Close)
	user := userRoute(100, 5*time.Millisecond)
	user.Pattern = "/users/{id:[1-9][0-9]*}"
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
	client := testRoute{Name: "client", Pattern: "/clients/{id:[1-9][0-9]*}", TTL: time.Minute}
	return newEnv(t, up, []testRoute{user, list, client}), d
}

// TestDemoOriginsBatchAndSplit: against both origins, per-ID reads are
// merged into bulk calls whose elements are stored (a second round costs no
// bulk call), elements carry an ETag clients revalidate with, and a split
// list comes back gzip-coded to a client that accepts gzip.
func TestDemoOriginsBatchAndSplit(t *testing.T) {
	for _, o := range demoOrigins {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			e, d := demoEnv(t, o.framework)
			paths := userPaths(1, 50)
			for round := range 2 {
				before := d.Counts()["GET /users"]
				for i, a := range fetchAll(e, paths, func(i int) http.Header {
					return http.Header{"Accept-Encoding": {[]string{"gzip", "", "gzip, deflate, br"}[i%3]}}
				}) {
					if a.err != nil || a.code != 200 || !strings.Contains(a.body, `"id":`+idOf(paths[i])+`,`) {
						t.Fatalf("round %d %s: %d %q %v", round, paths[i], a.code, a.body, a.err)
					}
				}
				calls := d.Counts()["GET /users"] - before
				if round == 0 && calls == 0 || round == 1 && calls != 0 {
					t.Errorf("round %d: %d bulk calls, want some then none (elements stored)", round, calls)
				}
			}
			if n := d.Counts()["GET /users/{id}"]; n != 0 {
				t.Errorf("%d per-ID calls, want every read batched", n)
			}
			r, _ := e.get("/users/3")
			tag := r.Header.Get("Etag")
			if r2, _ := e.do(http.MethodGet, "/users/3", http.Header{"If-None-Match": {tag}}); tag == "" || r2.StatusCode != http.StatusNotModified {
				t.Errorf("element ETag %q: revalidation answered %d, want 304", tag, r2.StatusCode)
			}

			var ids []string
			for i := 30; i <= 90; i++ {
				ids = append(ids, strconv.Itoa(i))
			}
			req, _ := http.NewRequest(http.MethodGet, e.front.URL+"/users?ids="+strings.Join(ids, ","), nil)
			req.Header.Set("Accept-Encoding", "gzip")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" {
				t.Fatalf("split list: %d Content-Encoding %q, want gzip", resp.StatusCode, resp.Header.Get("Content-Encoding"))
			}
			zr, err := gzip.NewReader(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(zr)
			if n := strings.Count(string(body), `"id":`); n != len(ids) {
				t.Errorf("split list holds %d elements, want %d", n, len(ids))
			}
		})
	}
}

// TestDemoOriginsVariants: against both origins, one client URL asked for
// with six Accept-Encoding spellings costs one upstream call (issue 24 item
// 3's normalisation, with the framework origin's Vary: Accept-Encoding and
// a body under its gzip threshold), and every answer decodes to the same
// body.
func TestDemoOriginsVariants(t *testing.T) {
	for _, o := range demoOrigins {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			e, d := demoEnv(t, o.framework)
			var first string
			for _, ae := range []string{"", "gzip", "gzip, deflate", "gzip, deflate, br", "gzip, deflate, br, zstd", "br, gzip"} {
				h := http.Header{}
				if ae != "" {
					h.Set("Accept-Encoding", ae)
				}
				r, b := e.do(http.MethodGet, "/clients/701", h)
				if r.StatusCode != 200 || r.Header.Get("Content-Encoding") != "" {
					t.Fatalf("%q: %d Content-Encoding %q", ae, r.StatusCode, r.Header.Get("Content-Encoding"))
				}
				if first == "" {
					first = b
				} else if b != first {
					t.Errorf("%q: body %q, want %q", ae, b, first)
				}
			}
			if n := d.Counts()["GET /clients/{id}"]; n != 1 {
				t.Errorf("%d upstream calls for six spellings of Accept-Encoding, want 1", n)
			}
		})
	}
}
