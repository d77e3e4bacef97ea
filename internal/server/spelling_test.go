package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// frameworkOrigin behaves like an Express (or Rails, Spring) app with
// its defaults: routes match case-insensitively, with or without a
// trailing slash, after the server merged "//" and resolved dot segments;
// ";params" are dropped from a segment (Tomcat, Jetty); an integer id is
// parsed leniently (parseInt, pg: "05", "+5" are 5). Every answer says
// Vary: Accept-Encoding and carries a weak ETag. GET /{clients,items}/{id}
// answers "<kind>-<id>-v<n>"; PATCH, PUT and DELETE bump n and answer 200.
type frameworkOrigin struct {
	*httptest.Server
	mu  sync.Mutex
	ver map[string]int
}

func newFrameworkOrigin(t testing.TB) *frameworkOrigin {
	o := &frameworkOrigin{ver: map[string]int{}}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		segs := strings.Split(strings.Trim(path.Clean("/"+strings.ToLower(r.URL.Path)), "/"), "/")
		for i, s := range segs {
			segs[i], _, _ = strings.Cut(s, ";")
		}
		w.Header().Set("Vary", "Accept-Encoding")
		if len(segs) != 2 || segs[0] != "clients" && segs[0] != "items" {
			http.NotFound(w, r)
			return
		}
		id, err := strconv.Atoi(segs[1])
		if err != nil {
			http.NotFound(w, r)
			return
		}
		res := fmt.Sprintf("%s-%d", segs[0], id)
		o.mu.Lock()
		defer o.mu.Unlock()
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			o.ver[res]++
		}
		b := fmt.Sprintf("%s-v%d", res, o.ver[res])
		w.Header().Set("ETag", fmt.Sprintf(`W/"%x"`, len(b)+o.ver[res]))
		fmt.Fprint(w, b)
	}))
	t.Cleanup(o.Close)
	return o
}

// The shipped sample's shape: an anchored client route with its write
// route (no catch-all), and an items route invalidated by URI alone.
const frameworkConfig = `
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, token: secret}
upstream: {url: %s, timeout: 2s}
cache:
  l1: {max_bytes: 16MiB}
  l2: {redis: {addrs: [%s], timeout: 200ms}}
routes:
  - {name: client, path: "/clients/{id:[1-9][0-9]*}", ttl: 5m, tags: ["client:{id}"]}
  - {name: client-write, methods: [PATCH, PUT, DELETE], path: "/clients/{id:[1-9][0-9]*}", invalidate: ["client:{id}"]}
  - {name: item, path: "/items/{id}", ttl: 5m}
`

// Issue 20 item 11 and issue 24 item 4: lenient for invalidation. A write
// under any spelling a framework-shaped origin accepts for a resource —
// case, trailing slash, "//", dot segments, ";params", leading zeros, a
// sign — leaves the canonical read fresh on the writing replica at once
// and on its peer within the bound, whether a write route or only the
// URI names it. On 16d946c every one of these writes answered 200 (the
// origin applied it) and the read stayed a stale hit on both replicas.
func TestLenientSpellingsInvalidate(t *testing.T) {
	rs := redistest.Start(t)
	o := newFrameworkOrigin(t)
	yaml := fmt.Sprintf(frameworkConfig, o.URL, rs.Addr())
	a, b := startReplicaYAML(t, yaml), startReplicaYAML(t, yaml)
	spellings := []string{"/%s/5/", "/%S/5", "/%C/5", "/%s/05", "/%s/%%2B5", "//%s/5", "/%s/./5", "/%s/x/../5", "/%s/5;v=1", "/%C/005/"}
	for _, kind := range []string{"clients", "items"} {
		read := "/" + kind + "/5"
		for v, sp := range spellings {
			write := strings.NewReplacer("%s", kind, "%S", strings.ToUpper(kind[:1])+kind[1:], "%C", strings.ToUpper(kind), "%%", "%").Replace(sp)
			writer, peer := a, b
			if v%2 == 1 {
				writer, peer = b, a
			}
			cachedOnBoth(t, writer, peer, read)
			code, _, _ := writer.do(t, http.MethodPatch, write)
			if code != 200 {
				t.Fatalf("PATCH %s: %d", write, code)
			}
			want := fmt.Sprintf("%s-5-v%d", kind, v+1)
			if got, cs := writer.get(t, read); got != want {
				t.Errorf("PATCH %s: the writer read %s as %q (%s), want %q", write, read, got, cs, want)
			}
			for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				if got, cs := peer.get(t, read); got == want {
					break
				} else if time.Now().After(deadline) {
					t.Errorf("PATCH %s: the peer still reads %s as %q (%s) 2s later, want %q", write, read, got, cs, want)
					break
				}
			}
		}
	}
}

// Strict for storage: a read under a spelling that is not the canonical
// one passes through uncached (Cache-Status detail=non-canonical), so one
// resource is one entry; the canonical read is cached as before.
func TestOnlyCanonicalSpellingStored(t *testing.T) {
	rs := redistest.Start(t)
	o := newFrameworkOrigin(t)
	a := startReplicaYAML(t, fmt.Sprintf(frameworkConfig, o.URL, rs.Addr()))
	for _, p := range []string{"/items/05", "/items/+5", "/items/5;v=1", "//items/5", "/items/./5"} {
		for range 2 {
			code, h, _ := a.do(t, http.MethodGet, p)
			if cs := h.Get("Cache-Status"); code != 200 || !strings.Contains(cs, "non-canonical") && !strings.Contains(cs, "no-route") {
				t.Errorf("GET %s: %d %q, want a pass-through", p, code, cs)
			}
		}
	}
	a.get(t, "/items/5")
	if _, cs := a.get(t, "/items/5"); !strings.Contains(cs, "hit") {
		t.Errorf("canonical read not cached: %q", cs)
	}
}
