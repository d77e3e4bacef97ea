package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l1"
)

// uriRoutes: a cached read route, a write route for another path that
// names no invalidate tags, and an uncached route.
var uriRoutes = []testRoute{
	clientRoute,
	{Name: "action", Methods: []string{"POST"}, Pattern: "/actions/{id}"},
	{Name: "events", Methods: []string{"GET"}, Pattern: "/events/{id}"},
}

// countingInvalidator is withL1Invalidator that also records every tag it
// was asked to drop.
func countingInvalidator(tags *[]string, mu *sync.Mutex) envOpt {
	return func(o *proxyOptions, s *l1.Store) {
		o.Invalidator = invalidatorFunc(func(_ context.Context, ts ...string) error {
			mu.Lock()
			*tags = append(*tags, ts...)
			mu.Unlock()
			s.DeleteTags(ts...)
			return nil
		})
	}
}

// RFC 9111 §4.4: a non-error answer to an unsafe method invalidates the
// target URI and the same-origin Location and Content-Location, whichever
// route they match, even when no route matched the write; every query and
// variant of the path goes with it. Other origins' URIs, error answers and
// safe methods invalidate nothing. Before invalidation by URI, only a
// write route's invalidate tags were dropped: every "dropped" row below
// stayed a hit.
func TestURIInvalidation(t *testing.T) {
	reads := []string{"/clients/1", "/clients/1?x=1", "/clients/2", "/clients/3"}
	tests := []struct {
		name         string
		method, path string
		code         int
		header       map[string]string // {front} and {up} stand for the two hosts
		hang         bool              // the upstream answers after the timeout
		dropped      []string
	}{
		{"no route: the target, every query", http.MethodPut, "/clients/1", 204, nil, false, []string{"/clients/1", "/clients/1?x=1"}},
		{"another route's write: Location", http.MethodPost, "/actions/1", 303, map[string]string{"Location": "/clients/2"}, false, []string{"/clients/2"}},
		{"absolute Content-Location, request host", http.MethodPost, "/actions/1", 201, map[string]string{"Content-Location": "http://{front}/clients/3"}, false, []string{"/clients/3"}},
		{"absolute Location, upstream host", http.MethodPost, "/actions/1", 302, map[string]string{"Location": "https://{up}/clients/2"}, false, []string{"/clients/2"}},
		{"relative reference", http.MethodPost, "/clients/1/rename", 303, map[string]string{"Location": "../3"}, false, []string{"/clients/3"}},
		{"both, and the target", http.MethodDelete, "/clients/1", 200, map[string]string{"Location": "/clients/2", "Content-Location": "/clients/3"}, false, []string{"/clients/1", "/clients/1?x=1", "/clients/2", "/clients/3"}},
		{"unknown outcome: the target", http.MethodPut, "/clients/2", 0, nil, true, []string{"/clients/2"}},
		{"cross-origin Location ignored", http.MethodPost, "/actions/1", 303, map[string]string{"Location": "http://other.example/clients/1"}, false, nil},
		{"protocol-relative ignored", http.MethodPost, "/actions/1", 303, map[string]string{"Content-Location": "//other.example/clients/1"}, false, nil},
		{"other scheme ignored", http.MethodPost, "/actions/1", 201, map[string]string{"Location": "ftp://{front}/clients/1"}, false, nil},
		{"client error keeps", http.MethodPut, "/clients/1", 409, map[string]string{"Location": "/clients/2"}, false, nil},
		{"server error keeps", http.MethodDelete, "/clients/1", 500, nil, false, nil},
		{"safe method keeps", http.MethodOptions, "/clients/1", 200, nil, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hosts atomic.Value
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodGet {
					fmt.Fprint(w, r.URL.String())
					return
				}
				if tc.hang {
					time.Sleep(time.Second)
					return
				}
				for k, v := range tc.header {
					w.Header().Set(k, strings.NewReplacer("{front}", hosts.Load().([2]string)[0], "{up}", hosts.Load().([2]string)[1]).Replace(v))
				}
				w.WriteHeader(tc.code)
			})
			e := newEnv(t, up, uriRoutes, withL1Invalidator, func(o *proxyOptions, _ *l1.Store) { o.Timeout = 300 * time.Millisecond })
			fu, _ := url.Parse(e.front.URL)
			uu, _ := url.Parse(up.URL)
			hosts.Store([2]string{fu.Host, uu.Host})
			for _, p := range reads {
				e.get(p)
			}
			req, _ := http.NewRequest(tc.method, e.front.URL+tc.path, nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			for _, p := range reads {
				r, _ := e.get(p)
				cs := r.Header.Get("Cache-Status")
				if want := slices.Contains(tc.dropped, p); want != strings.Contains(cs, "fwd=miss") {
					t.Errorf("%s after %s %s → %d: Cache-Status %q, want dropped=%v", p, tc.method, tc.path, resp.StatusCode, cs, want)
				}
			}
		})
	}
}

// A flood of writes to paths no cacheable route could have stored costs no
// invalidation at all (no Redis round trip, no tombstone); writes to one
// cacheable path cost one tag each, never more than target, Location and
// Content-Location.
func TestURIInvalidationBounded(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "/elsewhere/"+r.URL.Path)
		w.WriteHeader(201)
	})
	var mu sync.Mutex
	var tags []string
	e := newEnv(t, up, uriRoutes, countingInvalidator(&tags, &mu))
	for i := range 50 {
		for _, p := range []string{fmt.Sprintf("/events/%d", i), fmt.Sprintf("/nowhere/%d", i), fmt.Sprintf("/clients/%d/x?q=%d", i, i)} {
			req, _ := http.NewRequest(http.MethodPost, e.front.URL+p, nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	}
	mu.Lock()
	n := len(tags)
	mu.Unlock()
	if n != 0 {
		t.Fatalf("150 writes to uncacheable paths invalidated %d tags", n)
	}
	req, _ := http.NewRequest(http.MethodPost, e.front.URL+"/clients/5?a=1", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(tags, []string{"_uri:/clients/5"}) {
		t.Fatalf("tags = %q, want the target's URI tag alone", tags)
	}
}

// A reload that raises upstream.timeout lets a fetch run longer than the
// tombstones of the start-up timeout lasted: a write acknowledged while
// such a fetch ran must still keep its answer out of the cache. The old
// code kept the start-up window (timeout + 10s) and stored the answer.
func TestTombstonesOutliveReloadedTimeout(t *testing.T) {
	c := &clock{}
	var e *env
	var first atomic.Bool
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if first.CompareAndSwap(false, true) {
			c.advance(time.Second)
			e.h.Invalidated("client:7") // the write, acknowledged mid-fetch
			c.advance(40 * time.Second) // within the reloaded 60s timeout
			fmt.Fprint(w, "before the write")
			return
		}
		fmt.Fprint(w, "after the write")
	})
	e = newEnv(t, up, []testRoute{clientRoute}, withClock(c)) // timeout 2s: window 12s
	u, _ := url.Parse(up.URL)
	if err := e.h.SetUpstream(u, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, b := e.get("/clients/7"); b != "before the write" {
		t.Fatalf("first GET = %q", b)
	}
	r, b := e.get("/clients/7")
	if b != "after the write" || up.calls.Load() != 2 {
		t.Fatalf("second GET = %q (%s), upstream calls %d: the answer fetched across the write was cached",
			b, r.Header.Get("Cache-Status"), up.calls.Load())
	}
}
