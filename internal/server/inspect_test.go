package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// TestInspectAndPurgeURL (issue 22, item 2): GET /cache?url= tells, behind
// the token, which tiers hold a URL, how old, for how long and under which
// tags; POST /purge?url= drops it from both.
func TestInspectAndPurgeURL(t *testing.T) {
	rs := redistest.Start(t)
	o := newOrigin(t)
	r := startReplica(t, o.URL, l2Block(false, rs.Addr()))
	const target = "http://clients.svc/clients/42"
	auth := []string{"Authorization", "Bearer secret"}
	inspect := func() map[string]any {
		t.Helper()
		code, h, b := r.do(t, http.MethodGet, "admin:/cache?url="+url.QueryEscape(target), auth...)
		if code != http.StatusOK || h.Get("Cache-Control") != "no-store" {
			t.Fatalf("GET /cache: %d %q (Cache-Control %q)", code, b, h.Get("Cache-Control"))
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(b), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	tiersOf := func(v map[string]any) []string {
		var out []string
		for _, e := range v["entries"].([]any) {
			out = append(out, e.(map[string]any)["tier"].(string))
		}
		slices.Sort(out)
		return out
	}

	if code, _, _ := r.do(t, http.MethodGet, "admin:/cache?url="+url.QueryEscape(target)); code != http.StatusUnauthorized {
		t.Errorf("GET /cache without the token: %d, want 401", code)
	}
	if code, _, _ := r.do(t, http.MethodGet, "admin:/cache?url="+url.QueryEscape("http://clients.svc/nowhere"), auth...); code != http.StatusNotFound {
		t.Errorf("GET /cache of a URL no route takes: %d, want 404", code)
	}
	if v := inspect(); v["cached"] != false || v["route"] != "client" || v["key"] != "GET clients.svc/clients/42" {
		t.Fatalf("before any request: %v", v)
	}

	r.get(t, "/clients/42")
	var v map[string]any
	eventually(t, 5*time.Second, "the entry in L1 and L2", func() bool {
		v = inspect()
		return slices.Equal(tiersOf(v), []string{"l1", "l2"})
	})
	e := v["entries"].([]any)[0].(map[string]any)
	if v["cached"] != true || e["status"] != float64(200) || e["fresh"] != true || e["ttl_left"] == "0s" {
		t.Errorf("inspection %v", v)
	}
	if tags := e["tags"].([]any); !slices.Contains(tags, any("client:42")) {
		t.Errorf("tags %v, want client:42 among them", tags)
	}
	if keys := v["l1_keys"].([]any); len(keys) != 1 || keys[0] != "GET clients.svc/clients/42" {
		t.Errorf("l1_keys %v", keys)
	}

	code, _, b := r.do(t, http.MethodPost, "admin:/purge?url="+url.QueryEscape(target), auth...)
	if code != http.StatusOK || !strings.Contains(b, `"purged":1`) {
		t.Fatalf("POST /purge?url=: %d %q", code, b)
	}
	if v := inspect(); v["cached"] != false || len(v["entries"].([]any)) != 0 {
		t.Errorf("after purge by url: %v", v)
	}
}
