package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// quarantineConfig is a batch route and its split list; the user route's
// ttl is the test's, so that a reload can change the file.
const quarantineConfig = `
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, token: secret}
upstream: {url: %s, timeout: 2s}
cache:
  l1: {max_bytes: 16MiB}
routes:
  - name: user
    path: "/users/{id:[0-9]+}"
    ttl: %s
    batch: {path: /users, param: ids, id_field: id, max_wait: 1ms}
  - name: users
    path: /users
    split: {param: ids, route: user}
`

// TestReloadKeepsBatchQuarantine: an id that made a shared bulk call fail
// (the upstream's 400 to any call that names it) and then failed alone is
// quarantined (internal/batch): for a while it is fetched in a call of its
// own and joins no batch. A reload that leaves the route's batch settings
// as they were keeps the quarantine, so a list naming the id after it
// costs two calls, the good id's and the bad one's own, not three. Each
// reload made every batcher anew and forgot it: the id joined a shared
// call at once and failed it again, and the good id of another list paid
// for it.
func TestReloadKeepsBatchQuarantine(t *testing.T) {
	var mu sync.Mutex
	var calls [][]string
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/users" {
			http.NotFound(w, r)
			return
		}
		ids := strings.Split(r.URL.Query().Get("ids"), ",")
		mu.Lock()
		calls = append(calls, ids)
		mu.Unlock()
		if slices.Contains(ids, "999") {
			http.Error(w, "no such id: 999", http.StatusBadRequest)
			return
		}
		out := []map[string]any{}
		for _, id := range ids {
			n, _ := strconv.Atoi(id)
			out = append(out, map[string]any{"id": n})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(o.Close)
	made := func() [][]string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(calls)
	}
	fc := startFromFileYAML(t, fmt.Sprintf(quarantineConfig, o.URL, "5m"))

	fc.do(t, http.MethodGet, "/users?ids=1,999")
	if got := made(); len(got) != 3 {
		t.Fatalf("first list: calls %q, want 3 (1,999 together, then each alone)", got)
	}
	// The operator reloads: a ttl changed, the batch settings did not.
	if err := fc.rewrite(t, fmt.Sprintf(quarantineConfig, o.URL, "6m")); err != nil {
		t.Fatal(err)
	}
	wantReloads(t, fc, "1", "0", "0")
	fc.do(t, http.MethodGet, "/users?ids=2,999")
	if got := made()[3:]; len(got) != 2 || slices.ContainsFunc(got, func(ids []string) bool { return len(ids) != 1 }) {
		t.Fatalf("list after the reload: calls %q, want 2 of one id each (999 still quarantined)", got)
	}
}
