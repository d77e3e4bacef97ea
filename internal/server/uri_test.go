package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/redistest"
)

// inL2 waits until L2 holds an entry whose key ends with path, so that a
// later "not read from L2" cannot pass only because L2 never had it.
func inL2(t testing.TB, addr, path string) {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	eventually(t, 2*time.Second, "L2 holds "+path, func() bool {
		keys, _ := rc.Keys(context.Background(), "sidecache:e:*"+path).Result()
		return len(keys) > 0
	})
}

// uriOrigin answers GET /clients/{id} with "client-<id>-v<n>" and the
// surrogate keys "client-<id> clients"; POST /clients/{id}/rename bumps the
// version and answers 303 to the client's URI (on the Host the replicas
// are reached by), DELETE /clients/{id} bumps it and answers 204. No route
// of the config below invalidates anything on these writes: only their
// URIs do.
type uriOrigin struct {
	*httptest.Server
	gets atomic.Int64
	mu   sync.Mutex
	ver  map[string]int
}

func newURIOrigin(t testing.TB) *uriOrigin {
	o := &uriOrigin{ver: map[string]int{}}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest := strings.TrimPrefix(r.URL.Path, "/clients/")
		id, action, _ := strings.Cut(rest, "/")
		o.mu.Lock()
		defer o.mu.Unlock()
		switch {
		case r.Method == http.MethodGet:
			o.gets.Add(1)
			w.Header().Set("Surrogate-Key", "client-"+id+" clients")
			fmt.Fprintf(w, "client-%s-v%d", id, o.ver[id])
		case r.Method == http.MethodPost && action == "rename":
			o.ver[id]++
			w.Header().Set("Location", "http://clients.svc/clients/"+id)
			w.WriteHeader(http.StatusSeeOther)
		case r.Method == http.MethodDelete:
			o.ver[id]++
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
	}))
	t.Cleanup(o.Close)
	return o
}

const uriConfig = `
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, token: secret}
upstream: {url: %s, timeout: 2s}
cache:
  l1: {max_bytes: 16MiB}
  l2: {redis: {addrs: [%s], timeout: 200ms}}
routes:
  - {name: client, path: "/clients/{id}", ttl: 5m, tags: ["client:{id}"]}
  - {name: rename, methods: [POST], path: "/clients/{id}/rename"}
`

var noRedirect = &http.Client{Timeout: 10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (r *replica) write(t testing.TB, method, path string, want int) {
	t.Helper()
	req, _ := http.NewRequest(method, r.proxy+path, nil)
	req.Host = "clients.svc"
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d", method, path, resp.StatusCode, want)
	}
}

// Invalidation by URI (RFC 9111 §4.4) across replicas sharing Redis: a
// POST whose 303 names a client's URI in Location, and a DELETE that no
// route matches, each drop that URI on the writing replica at once, on the
// peer within the bound, and in L2 — a replica started afterwards does not
// read the replaced version from L2. On the old code no route invalidated
// anything on these writes: every read below returned the old version.
func TestURIInvalidationEveryReplica(t *testing.T) {
	rs := redistest.Start(t)
	o := newURIOrigin(t)
	yaml := fmt.Sprintf(uriConfig, o.URL, rs.Addr())
	a, b := startReplicaYAML(t, yaml), startReplicaYAML(t, yaml)
	for _, id := range []string{"7", "8"} {
		a.get(t, "/clients/"+id)
		eventually(t, 2*time.Second, "B holds client "+id, func() bool {
			_, cs := b.get(t, "/clients/"+id)
			return strings.Contains(cs, "hit")
		})
	}

	a.write(t, http.MethodPost, "/clients/7/rename", http.StatusSeeOther)
	if got, _ := a.get(t, "/clients/7"); got != body("7", 1) {
		t.Fatalf("A read its own write as %q", got)
	}
	eventually(t, 2*time.Second, "B sees the rename", func() bool {
		got, _ := b.get(t, "/clients/7")
		return got == body("7", 1)
	})

	b.write(t, http.MethodDelete, "/clients/7", http.StatusNoContent)
	if got, _ := b.get(t, "/clients/7"); got != body("7", 2) {
		t.Fatalf("B read its own write as %q", got)
	}
	eventually(t, 2*time.Second, "A sees the delete", func() bool {
		got, _ := a.get(t, "/clients/7")
		return got == body("7", 2)
	})

	// L2: client 8 is stored there; after its rename, a new replica
	// (empty L1) must not be answered from L2's old copy.
	inL2(t, rs.Addr(), "/clients/8")
	a.write(t, http.MethodPost, "/clients/8/rename", http.StatusSeeOther)
	c := startReplicaYAML(t, yaml)
	if got, cs := c.get(t, "/clients/8"); got != body("8", 1) {
		t.Fatalf("new replica read %q (%s) from L2 after the rename", got, cs)
	}
}

// Keys from the upstream's Surrogate-Key header are purged through the
// admin API like config tags: in this replica's L1, the peer's and L2.
// On the old code those keys were never tags: the purges dropped nothing.
func TestPurgeUpstreamTagEveryReplica(t *testing.T) {
	rs := redistest.Start(t)
	o := newURIOrigin(t)
	yaml := fmt.Sprintf(uriConfig, o.URL, rs.Addr())
	a, b := startReplicaYAML(t, yaml), startReplicaYAML(t, yaml)
	for _, id := range []string{"1", "2", "3"} {
		a.get(t, "/clients/"+id)
		eventually(t, 2*time.Second, "B holds client "+id, func() bool {
			_, cs := b.get(t, "/clients/"+id)
			return strings.Contains(cs, "hit")
		})
	}
	if _, h, _ := a.do(t, http.MethodGet, "/clients/1"); h.Get("Surrogate-Key") != "" {
		t.Fatalf("client saw Surrogate-Key %q", h.Get("Surrogate-Key"))
	}
	purge := func(tag string) {
		t.Helper()
		if code, _, body := a.do(t, http.MethodPost, "admin:/purge?tag="+tag, "Authorization", "Bearer secret"); code != 200 {
			t.Fatalf("purge %s: %d %s", tag, code, body)
		}
	}

	// L2 first: a replica that never held client 3 must miss after the
	// purge, not read L2's copy.
	inL2(t, rs.Addr(), "/clients/3")
	purge("client-3")
	c := startReplicaYAML(t, yaml)
	if _, cs := c.get(t, "/clients/3"); !strings.Contains(cs, "fwd=miss") {
		t.Fatalf("new replica after purge of client-3: %q, want a miss", cs)
	}

	purge("client-1")
	eventually(t, 2*time.Second, "B dropped client 1", func() bool {
		_, cs := b.get(t, "/clients/1")
		return strings.Contains(cs, "fwd=miss")
	})
	if _, cs := b.get(t, "/clients/2"); !strings.Contains(cs, "hit") {
		t.Fatalf("purge of client-1 dropped client 2 on B: %q", cs)
	}
	purge("clients")
	eventually(t, 2*time.Second, "B dropped client 2", func() bool {
		_, cs := b.get(t, "/clients/2")
		return strings.Contains(cs, "fwd=miss")
	})
}
