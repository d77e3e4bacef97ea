package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l1"
)

// A write whose upstream call times out may still have been applied: the
// sidecar answers 504 and invalidates anyway, so the next read is fresh.
func TestWriteWithUnknownOutcomeInvalidates(t *testing.T) {
	var mu sync.Mutex
	name := "old"
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			name = string(b) // applied at once…
			mu.Unlock()
			time.Sleep(600 * time.Millisecond) // …answered too late
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprint(w, name)
	})
	write := testRoute{Name: "client-write", Methods: []string{"PATCH"}, Pattern: "/clients/{id}", Invalidate: []string{"client:{id}"}}
	e := newEnv(t, up, []testRoute{clientRoute, write}, withL1Invalidator, func(o *proxyOptions, _ *l1.Store) { o.Timeout = 200 * time.Millisecond })
	if _, b := e.get("/clients/1"); b != "old" {
		t.Fatalf("first read %q", b)
	}
	req, _ := http.NewRequest(http.MethodPatch, e.front.URL+"/clients/1", strings.NewReader("new"))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("PATCH: %d, want 504", resp.StatusCode)
	}
	if _, b := e.get("/clients/1"); b != "new" {
		t.Fatalf("read after a timed-out write = %q, want new (the write was applied)", b)
	}
}

// An upstream that is itself a cache keeps its Cache-Status member; this
// cache's member follows it (RFC 9211 §2), on misses and hits alike.
func TestCacheStatusAppends(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Status", "origin-cache; hit")
		fmt.Fprint(w, "x")
	})
	e := newEnv(t, up, []testRoute{clientRoute})
	for _, tc := range []struct{ path, ours string }{
		{"/clients/1", "sidecache; fwd=miss"},
		{"/clients/1", "sidecache; hit"},
		{"/other", "sidecache; fwd=bypass"},
	} {
		r, _ := e.get(tc.path)
		if cs := r.Header.Get("Cache-Status"); !strings.HasPrefix(cs, "origin-cache; hit, "+tc.ours) {
			t.Errorf("%s: Cache-Status %q, want the origin's member then %q", tc.path, cs, tc.ours)
		}
	}
}

// A bulk answer that says no-cache is answered but not stored, as a per-ID
// answer saying so would not be. (Which Vary values keep elements from
// being stored: TestBatchVary.)
func TestBulkVaryOrNoCacheNotStored(t *testing.T) {
	for _, tc := range []struct{ header, value string }{
		{"Cache-Control", "no-cache"},
	} {
		t.Run(tc.header, func(t *testing.T) {
			all := usersAnswer(func(string) bool { return true })
			o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
				w.Header().Set(tc.header, tc.value)
				all(w, r, ids)
			})
			e := newEnv(t, o.upstream, []testRoute{userRoute(100, 5*time.Millisecond)})
			for i := range 2 {
				r, b := e.get("/users/7")
				if r.StatusCode != 200 || !strings.Contains(b, `"id":7`) {
					t.Fatalf("request %d: %d %q", i, r.StatusCode, b)
				}
			}
			if n := len(o.snapshot()); n != 2 {
				t.Fatalf("bulk calls = %d, want 2 (nothing stored)", n)
			}
		})
	}
}
