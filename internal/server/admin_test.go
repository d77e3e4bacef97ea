package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/config"
)

// TestPurgeUnknownRouteIs404 (issue 22, item 3): an unknown route name is
// the caller's mistake, not a failure to retry.
func TestPurgeUnknownRouteIs404(t *testing.T) {
	o := newOrigin(t)
	r := startReplica(t, o.URL, "")
	code, _, b := r.do(t, http.MethodPost, "admin:/purge?route=nosuch", "Authorization", "Bearer secret")
	if code != http.StatusNotFound {
		t.Fatalf("POST /purge?route=nosuch: %d %q, want 404", code, b)
	}
	if code, _, b := r.do(t, http.MethodPost, "admin:/purge?route=client", "Authorization", "Bearer secret"); code != http.StatusOK {
		t.Fatalf("POST /purge?route=client: %d %q", code, b)
	}
}

// TestPurgeKeyReportsWhatWasFound: purging a key that is not cached
// answers {"purged":0}; one that is, {"purged":1}, and it is gone.
func TestPurgeKeyReportsWhatWasFound(t *testing.T) {
	o := newOrigin(t)
	r := startReplica(t, o.URL, "")
	purge := func(key string) string {
		t.Helper()
		code, _, b := r.do(t, http.MethodPost, "admin:/purge?key="+url.QueryEscape(key), "Authorization", "Bearer secret")
		if code != http.StatusOK {
			t.Fatalf("purge %q: %d %q", key, code, b)
		}
		return strings.TrimSpace(b)
	}
	const key = "GET clients.svc/clients/7"
	if got := purge(key); got != `{"purged":0}` {
		t.Errorf("purge of an uncached key: %s, want {\"purged\":0}", got)
	}
	eventually(t, 5*time.Second, "a hit on /clients/7", func() bool {
		_, status := r.get(t, "/clients/7")
		return strings.Contains(status, "; hit")
	})
	if got := purge(key); got != `{"purged":1}` {
		t.Errorf("purge of a cached key: %s, want {\"purged\":1}", got)
	}
	if got := purge(key); got != `{"purged":0}` {
		t.Errorf("second purge: %s, want {\"purged\":0}", got)
	}
}

// TestRoutesShowEveryConfigField (issue 22, item 3): GET /routes names every
// field a route can set in the config file, under the config's name, and
// nothing else but the derived params and cacheable, so that a reload can
// be confirmed field by field.
func TestRoutesShowEveryConfigField(t *testing.T) {
	o := newOrigin(t)
	r := startReplicaYAML(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstream: {url: %s}
cache: {l1: {max_bytes: 1MiB}}
routes:
  - name: user
    path: /users/{id}
    ttl: 1m
    freshness: origin
    max_ttl: 1h
    forward_headers: all
    tags: ["user:{id}"]
    batch: {path: /users, param: ids, id_field: id, etag_field: version, max_in_flight: 3}
  - name: users
    path: /users
    split: {param: ids, route: user}
  - name: user-write
    methods: [PUT]
    path: /users/{id}
    invalidate: ["user:{id}"]
`, o.URL))
	code, _, b := r.do(t, http.MethodGet, "admin:/routes")
	if code != http.StatusOK {
		t.Fatalf("GET /routes: %d %q", code, b)
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(b), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d routes: %s", len(got), b)
	}
	want := yamlNames(reflect.TypeFor[config.Route]())
	derived := map[string]bool{"params": true, "cacheable": true}
	byName := map[string]map[string]any{}
	for _, rt := range got {
		byName[rt["name"].(string)] = rt
	}
	user := byName["user"]
	for name := range want {
		if _, ok := user[name]; !ok && name != "split" && name != "invalidate" {
			t.Errorf("route user: field %q missing from GET /routes", name)
		}
	}
	for _, rt := range got {
		for name := range rt {
			if !want[name] && !derived[name] {
				t.Errorf("route %v: field %q is not a config field", rt["name"], name)
			}
		}
	}
	checkNested := func(route, field string, typ reflect.Type) {
		t.Helper()
		m, _ := byName[route][field].(map[string]any)
		fields := yamlNames(typ)
		for name := range fields {
			if _, ok := m[name]; !ok {
				t.Errorf("route %s: %s.%s missing (%v)", route, field, name, m)
			}
		}
		for name := range m {
			if !fields[name] {
				t.Errorf("route %s: %s.%s is not a config field", route, field, name)
			}
		}
	}
	checkNested("user", "batch", reflect.TypeFor[config.Batch]())
	checkNested("users", "split", reflect.TypeFor[config.Split]())
	if _, ok := byName["user-write"]["invalidate"]; !ok {
		t.Errorf("route user-write: invalidate missing")
	}
	for field, v := range map[string]any{
		"freshness": "origin", "max_ttl": "1h0m0s", "forward_headers": "all",
		"request_no_cache": "refresh", // origin mode's default
		"targeted_fields":  []any{"CDN-Cache-Control", "Surrogate-Control"},
	} {
		if !reflect.DeepEqual(user[field], v) {
			t.Errorf("route user: %s = %#v, want %#v", field, user[field], v)
		}
	}
	if b := user["batch"].(map[string]any); b["max_in_flight"] != float64(3) || b["max_size"] != float64(100) || b["etag_field"] != "version" {
		t.Errorf("route user: batch %v, want max_in_flight 3 and the default max_size 100", b)
	}
	if v := byName["users"]["request_no_cache"]; v != "ignore" {
		t.Errorf("route users: request_no_cache %v, want route mode's default ignore", v)
	}
	if s := byName["users"]["split"].(map[string]any); s["max_ids"] != float64(1000) {
		t.Errorf("route users: split.max_ids %v, want the effective default 1000", s["max_ids"])
	}
}

// yamlNames are the yaml field names of a config struct.
func yamlNames(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}
