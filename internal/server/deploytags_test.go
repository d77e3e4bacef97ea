package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// deployOrigin serves per-id versions: GET /wsum/{id} answers
// "wsum-<id>-v<n>", GET /users/{id} and the bulk GET /users?ids=… one
// {"id","v"} object per id; PATCH /clients/{id} (the write the routes
// invalidate for) bumps the id's version, as bump does behind the
// sidecars' back.
type deployOrigin struct {
	*httptest.Server
	mu  sync.Mutex
	ver map[string]int
}

func newDeployOrigin(t *testing.T) *deployOrigin {
	o := &deployOrigin{ver: map[string]int{}}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		defer o.mu.Unlock()
		switch id, ok := strings.CutPrefix(r.URL.Path, "/clients/"); {
		case ok && r.Method == http.MethodPatch:
			o.ver[id]++
			w.WriteHeader(http.StatusNoContent)
		case r.URL.Path == "/users":
			w.Header().Set("Content-Type", "application/json")
			var out []map[string]any
			for _, id := range strings.Split(r.URL.Query().Get("ids"), ",") {
				out = append(out, map[string]any{"id": id, "v": o.ver[id]})
			}
			_ = json.NewEncoder(w).Encode(out)
		case strings.HasPrefix(r.URL.Path, "/users/"):
			id := strings.TrimPrefix(r.URL.Path, "/users/")
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "v": o.ver[id]})
		default:
			id := strings.TrimPrefix(r.URL.Path, "/wsum/")
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprintf(w, "wsum-%s-v%d", id, o.ver[id])
		}
	}))
	t.Cleanup(o.Close)
	return o
}

func (o *deployOrigin) bump(id string) {
	o.mu.Lock()
	o.ver[id]++
	o.mu.Unlock()
}

// deployConfig is a deploy's config: the summary route's name, its tag
// template's prefix (the write invalidates the same), the user route's,
// and L1's size ("0": off).
func deployConfig(upstream, l2, wsum, wtag, utag, l1 string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
  token: secret
upstream:
  url: %[1]s
  timeout: 2s
cache:
  l1:
    max_bytes: %[6]s
%[2]s
routes:
  - name: %[3]s
    path: /wsum/{id}
    ttl: 5m
    tags: ["%[4]s:{id}"]
  - name: user
    path: /users/{id}
    ttl: 5m
    tags: ["%[5]s:{id}"]
    batch: {path: /users, param: ids, id_field: id, max_wait: 1ms}
  - name: users
    path: /users
    split: {param: ids, route: user}
  - name: client-write
    methods: [PATCH]
    path: /clients/{id}
    invalidate: ["%[4]s:{id}", "%[5]s:{id}"]
`, upstream, l2, wsum, wtag, utag, l1)
}

// storedInL2 waits until each path is an L2 hit for a replica with L1 off
// started from cfg (another pod of the old deploy): what the old pods
// stored is in Redis.
func storedInL2(t *testing.T, cfg string, paths ...string) {
	t.Helper()
	probe := startReplicaYAML(t, cfg)
	for _, p := range paths {
		eventually(t, 5*time.Second, p+" in L2", func() bool {
			_, cs := probe.get(t, p)
			return strings.Contains(cs, "detail=l2")
		})
	}
}

// A restart or rolling deploy that changes a route's tag templates: the
// new pods read from L2 what the old pods stored under the same keys,
// tagged with the old templates, which the new config's writes no longer
// invalidate. Such an entry is a miss for the new pods (it does not carry
// the tags their route gives it), fetched again and overwritten, on each
// path that reads L2: the per-key fill (/wsum/8), a batch route's id
// (/users/5) and a split list's ids (/users?ids=3,4). Before, each was
// served from L2 at its old version after the write, until its TTL.
func TestRestartWithChangedTagsDoesNotServeOldL2Entries(t *testing.T) {
	rs := redistest.Start(t)
	o := newDeployOrigin(t)
	l2 := l2Block(false, rs.Addr())
	old := deployConfig(o.URL, l2, "wsum", "w", "u", "16MiB")
	a := startReplicaYAML(t, old)
	paths := []string{"/wsum/8", "/users/5", "/users?ids=3,4"}
	for _, p := range paths {
		a.get(t, p)
	}
	storedInL2(t, deployConfig(o.URL, l2, "wsum", "w", "u", "0"), "/wsum/8", "/users/5", "/users/3", "/users/4")

	b := startReplicaYAML(t, deployConfig(o.URL, l2, "wsum", "summary", "user", "16MiB"))
	for _, id := range []string{"8", "5", "3"} {
		if code, _, _ := b.do(t, http.MethodPatch, "/clients/"+id); code != http.StatusNoContent {
			t.Fatalf("PATCH /clients/%s through B: %d", id, code)
		}
	}
	for _, tc := range []struct{ path, want string }{
		{"/wsum/8", "wsum-8-v1"},
		{"/users/5", `{"id":"5","v":1}`},
		{"/users?ids=3,4", `[{"id":"3","v":1},{"id":"4","v":0}]`},
	} {
		got, cs := b.get(t, tc.path)
		if strings.TrimSpace(got) != tc.want {
			t.Errorf("B after the write: GET %s = %q (%s), want %q", tc.path, got, cs, tc.want)
		}
	}
	// Fetched once and stored with B's tags: B's next read is a hit.
	if got, cs := b.get(t, "/wsum/8"); got != "wsum-8-v1" || !strings.Contains(cs, "hit") {
		t.Errorf("B's second read: %q (%s), want a hit on wsum-8-v1", got, cs)
	}
}

// The same for a route renamed by a deploy: an entry the old pods stored
// carries the old route tag, which a purge of the route by its new name
// does not reach.
func TestRestartWithRenamedRouteDoesNotServeOldL2Entries(t *testing.T) {
	rs := redistest.Start(t)
	o := newDeployOrigin(t)
	l2 := l2Block(false, rs.Addr())
	a := startReplicaYAML(t, deployConfig(o.URL, l2, "wsum", "summary", "user", "16MiB"))
	a.get(t, "/wsum/9")
	storedInL2(t, deployConfig(o.URL, l2, "wsum", "summary", "user", "0"), "/wsum/9")

	o.bump("9") // changed behind the sidecars' back: the operator purges
	b := startReplicaYAML(t, deployConfig(o.URL, l2, "wsummary", "summary", "user", "16MiB"))
	if code, _, body := b.do(t, http.MethodPost, "admin:/purge?route=wsummary", "Authorization", "Bearer secret"); code != http.StatusOK {
		t.Fatalf("purge: %d %q", code, body)
	}
	if got, cs := b.get(t, "/wsum/9"); got != "wsum-9-v1" {
		t.Errorf("B after purge?route=wsummary: %q (%s), want %q", got, cs, "wsum-9-v1")
	}
}
