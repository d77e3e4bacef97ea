package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// listOrigin is an app with a users list endpoint: GET /users?ids=1,2
// answers a JSON array of {"id":N,"v":"user-N-vK"}, GET /users/N one
// element, and a write to the list (DELETE or PATCH /users?ids=1,2, the
// ids read as Rails and Express read them: commas and repeated params)
// bumps each id's version and answers 200.
type listOrigin struct {
	*httptest.Server
	mu     sync.Mutex
	ver    map[string]int
	writes int
}

func newListOrigin(t testing.TB) *listOrigin {
	o := &listOrigin{ver: map[string]int{}}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		defer o.mu.Unlock()
		elem := func(id string) map[string]any {
			n, _ := strconv.Atoi(id)
			return map[string]any{"id": n, "v": fmt.Sprintf("user-%s-v%d", id, o.ver[id])}
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/users" && r.Method == http.MethodGet:
			out := []map[string]any{}
			for id := range strings.SplitSeq(r.URL.Query().Get("ids"), ",") {
				out = append(out, elem(id))
			}
			_ = json.NewEncoder(w).Encode(out)
		case r.URL.Path == "/users":
			o.writes++
			for _, v := range r.URL.Query()["ids"] {
				for id := range strings.SplitSeq(v, ",") {
					o.ver[strings.TrimSpace(id)]++
				}
			}
			fmt.Fprint(w, "{}")
		case strings.HasPrefix(r.URL.Path, "/users/") && r.Method == http.MethodGet:
			_ = json.NewEncoder(w).Encode(elem(strings.TrimPrefix(r.URL.Path, "/users/")))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(o.Close)
	return o
}

// The README's users example: a batch route and its split list on the
// batch's bulk path. No write route: the split and batch config is all
// that says ?ids= names users.
const listConfig = `
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, token: secret}
upstream: {url: %s, timeout: 2s}
cache:
  l1: {max_bytes: 16MiB}
  l2: {redis: {addrs: [%s], timeout: 200ms}}
routes:
  - name: user
    path: "/users/{id:[0-9]+}"
    ttl: 5m
    tags: ["user:{id}"]
    batch: {path: /users, param: ids, id_field: id, max_wait: 1ms}
  - name: users
    path: /users
    split: {param: ids, route: user, max_ids: 3}
`

// A write to a list endpoint (DELETE or PATCH /users?ids=1,2, answered
// 2xx) changed users 1 and 2: their per-ID entries, and every split list
// served from them, must not outlive it — on the writing replica at once,
// on its peer within the bound. Before, only /users's own URI dropped, and
// both replicas served /users/1 and /users?ids=1,2 at the version the
// write replaced until their ttl.
func TestListWriteInvalidatesEachID(t *testing.T) {
	rs := redistest.Start(t)
	o := newListOrigin(t)
	yaml := fmt.Sprintf(listConfig, o.URL, rs.Addr())
	a, b := startReplicaYAML(t, yaml), startReplicaYAML(t, yaml)
	for v, write := range []struct{ method, target string }{
		{http.MethodDelete, "/users?ids=1,2"},
		{http.MethodPatch, "/users?ids=2&ids=1"},
	} {
		writer, peer := a, b
		if v%2 == 1 {
			writer, peer = b, a
		}
		cachedOnBoth(t, writer, peer, "/users/1")
		cachedOnBoth(t, writer, peer, "/users/2")
		if code, _, body := writer.do(t, write.method, write.target); code != 200 {
			t.Fatalf("%s %s: %d %s", write.method, write.target, code, body)
		}
		want1, want2 := fmt.Sprintf("user-1-v%d", v+1), fmt.Sprintf("user-2-v%d", v+1)
		if got, cs := writer.get(t, "/users/1"); !strings.Contains(got, want1) {
			t.Errorf("%s %s: the writer read /users/1 as %s (%s), want %s", write.method, write.target, got, cs, want1)
		}
		if got, cs := writer.get(t, "/users?ids=1,2"); !strings.Contains(got, want1) || !strings.Contains(got, want2) {
			t.Errorf("%s %s: the writer's list reads %s (%s), want %s and %s", write.method, write.target, got, cs, want1, want2)
		}
		for _, tc := range []struct{ path, want string }{{"/users/2", want2}, {"/users/1", want1}} {
			for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				got, cs := peer.get(t, tc.path)
				if strings.Contains(got, tc.want) {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("%s %s: the peer still reads %s as %s (%s) 2s later, want %s", write.method, write.target, tc.path, got, cs, tc.want)
					break
				}
			}
		}
	}
}

// A write naming more ids than the list endpoint's bound (split.max_ids,
// at least 1000 on a batch's bulk path) is refused unsent: its
// invalidation cannot be listed within the bound.
func TestListWriteOverBoundRefused(t *testing.T) {
	rs := redistest.Start(t)
	o := newListOrigin(t)
	a := startReplicaYAML(t, fmt.Sprintf(listConfig, o.URL, rs.Addr()))
	var ids []string
	for i := range 1001 {
		ids = append(ids, strconv.Itoa(i+1))
	}
	code, h, _ := a.do(t, http.MethodDelete, "/users?ids="+strings.Join(ids, ","))
	if cs := h.Get("Cache-Status"); code != http.StatusBadRequest || !strings.Contains(cs, "detail=write-ids") {
		t.Errorf("1001 ids: %d %q, want 400 detail=write-ids", code, cs)
	}
	if code, _, body := a.do(t, http.MethodDelete, "/users?ids="+strings.Join(ids[:1000], ",")); code != 200 {
		t.Errorf("1000 ids: %d %s", code, body)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.writes != 1 {
		t.Errorf("the origin saw %d writes, want 1 (the refused one unsent)", o.writes)
	}
}
