package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/cache/l2"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/redistest"
	"github.com/sidecache/sidecache/internal/route"
)

// langOrigin is an app behind one route: /items/40 negotiates X-Lang and
// says so (Vary: X-Lang), every other item reads X-Lang too but forgets
// Vary (probe h1, D3). It records the X-Lang of every call per path.
type langOrigin struct {
	mu   sync.Mutex
	seen map[string][]string
}

func (o *langOrigin) handler(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	o.seen[r.URL.Path] = append(o.seen[r.URL.Path], r.Header.Get("X-Lang"))
	o.mu.Unlock()
	if r.URL.Path == "/items/40" {
		w.Header().Set("Vary", "X-Lang")
	}
	fmt.Fprintf(w, "%s lang=%s", r.URL.Path, r.Header.Get("X-Lang"))
}

// calls are the X-Lang values the origin got on path, in order.
func (o *langOrigin) calls(path string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.seen[path]...)
}

// itemRoute keys one host (key.host) whatever port a test replica
// listens on, so two replicas share their entries in L2.
var itemRoute = testRoute{Name: "item", Pattern: "/items/{id}", TTL: time.Minute, StaleWhileRevalidate: time.Hour,
	Key: cachekey.Options{AllQuery: true, Host: "items.test"}}

// TestLearnedHeaderNotStoredWithoutVary: once /items/40's Vary taught the
// route X-Lang, X-Lang is forwarded on every path of the route; an answer
// of /items/41, which reads X-Lang without naming it in Vary, made for an
// attacker's X-Lang must never be stored for clients that send another
// one or none (README, security model) — on the per-key fill, the
// stale-while-revalidate refresh and the L2 lease fill. A request without
// X-Lang is stored as before.
func TestLearnedHeaderNotStoredWithoutVary(t *testing.T) {
	evil := http.Header{"X-Lang": {"<script>evil</script>"}}
	const clean = "/items/41 lang="
	for _, tc := range []struct {
		name string
		l2   bool
		// warm: /items/41 is stored clean first and made stale, so the
		// attacker's request is served stale and its refresh carries
		// X-Lang.
		warm bool
	}{
		{name: "per-key fill"},
		{name: "stale-while-revalidate refresh", warm: true},
		{name: "lease fill", l2: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &langOrigin{seen: map[string][]string{}}
			up := newUpstream(t, o.handler)
			c := &clock{}
			opts := []envOpt{withClock(c)}
			if tc.l2 {
				srv := redistest.Start(t)
				st, err := l2.New(context.Background(), l2.Options{Addrs: []string{srv.Addr()}, Prefix: "lv:", Timeout: 2 * time.Second, LeaseHold: leaseHold})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = st.Close() })
				opts = append(opts, func(o *proxyOptions, l1s *l1.Store) {
					o.Cache = cache.NewTiered(l1s, st, cache.TieredOptions{})
					o.Leaser = st
				})
			}
			e := newEnv(t, up, []testRoute{itemRoute}, opts...)
			// The victims ask a second replica on the same L2 too (the
			// same replica when there is no L2).
			e2 := e
			if tc.l2 {
				e2 = newEnv(t, up, []testRoute{itemRoute}, opts...)
			}
			// Before learning X-Lang is withheld.
			if _, body := e.do("GET", "/items/42", evil); body != "/items/42 lang=" {
				t.Fatalf("before learning: %q, want X-Lang withheld", body)
			}
			// An honest client teaches the route X-Lang.
			if _, body := e.do("GET", "/items/40", http.Header{"X-Lang": {"en"}}); body != "/items/40 lang=en" {
				t.Fatalf("/items/40: %q", body)
			}
			if tc.warm {
				if _, body := e.get("/items/41"); body != clean {
					t.Fatalf("prime: %q", body)
				}
				c.advance(2 * time.Minute) // stale, within stale-while-revalidate
			}
			resp, body := e.do("GET", "/items/41", evil)
			switch {
			case tc.warm && body != clean:
				t.Fatalf("attacker: %q %q, want the stale clean copy", body, cacheStatus(resp))
			case !tc.warm && body != "/items/41 lang=<script>evil</script>":
				// Its own answer: X-Lang is forwarded once learned.
				t.Fatalf("attacker: %q %q, want the answer made for its X-Lang", body, cacheStatus(resp))
			}
			if tc.warm {
				// The attacker's stale hit refreshed the entry in the
				// background with its X-Lang. Victims are served the
				// stale copy while that refresh runs, and the first
				// one after it either reads what it stored or, when it
				// stored nothing, starts a refresh of its own, without
				// X-Lang.
				waitFor(t, func() bool { return len(o.calls("/items/41")) >= 2 })
				for {
					resp, body := e.get("/items/41")
					if body != clean {
						t.Fatalf("victim after the attacker's refresh: %q %q", body, cacheStatus(resp))
					}
					if calls := o.calls("/items/41"); len(calls) >= 3 {
						if calls[2] != "" {
							t.Fatalf("origin calls %q, want the victim's refresh without X-Lang", calls)
						}
						break
					}
					time.Sleep(2 * time.Millisecond)
				}
				waitFor(t, func() bool { return strings.Contains(cacheStatus(first(e.get("/items/41"))), "hit") })
			}
			for i, hdr := range []http.Header{nil, {"X-Lang": {"fr"}}, nil} {
				resp, body := e2.do("GET", "/items/41", hdr)
				if body != clean && body != "/items/41 lang="+hdr.Get("X-Lang") {
					t.Fatalf("victim %d (X-Lang %q): %q %q", i, hdr.Get("X-Lang"), body, cacheStatus(resp))
				}
			}
			// A request without X-Lang is stored as before: the last
			// victim's answer came from the cache.
			if !tc.warm {
				resp, body := e.get("/items/41")
				if body != clean || !strings.Contains(cacheStatus(resp), "hit") {
					t.Fatalf("no X-Lang: %q %q, want a hit", body, cacheStatus(resp))
				}
			}
		})
	}
}

func first(r *http.Response, _ string) *http.Response { return r }

// TestBatchLearnedHeaderNotStoredWithoutVary is the batch path of
// TestLearnedHeaderNotStoredWithoutVary: once a bulk answer's Vary taught
// the route X-Lang, bulk calls carry it; a bulk answer that reads X-Lang
// without naming it in Vary, made for an attacker's value, is answered to
// the requests of that call but never stored under the members' per-ID
// keys (vary-unnamed) — for a per-ID request and for a split list. Bulk
// calls without X-Lang store as before.
func TestBatchLearnedHeaderNotStoredWithoutVary(t *testing.T) {
	evil := http.Header{"X-Lang": {"<script>evil</script>"}}
	for _, tc := range []struct {
		name, attack string // the attacker's request: a per-ID read or a list
	}{
		{"per-ID", "/users/2"},
		{"split list", "/users?ids=2,3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			echo := usersAnswer(func(string) bool { return true }, "X-Lang")
			o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
				if slices.Contains(ids, "1") {
					w.Header().Set("Vary", "X-Lang") // the one id whose app declares it
				}
				echo(w, r, ids)
			})
			list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
			e := newEnv(t, o.upstream, []testRoute{userRoute(100, time.Millisecond), list})
			// /users/1 teaches the route X-Lang (vary-withheld).
			if a := fetch(t.Context(), e.front.URL+"/users/1", http.Header{"X-Lang": {"en"}}); a.code != 200 {
				t.Fatalf("/users/1: %d %v", a.code, a.err)
			}
			a := fetch(t.Context(), e.front.URL+tc.attack, evil)
			if a.code != 200 || !strings.Contains(a.body, `"x-lang":"\u003cscript\u003eevil\u003c/script\u003e"`) {
				t.Fatalf("attacker: %d %q %v, want its own answer", a.code, a.body, a.err)
			}
			if calls := o.snapshot(); calls[len(calls)-1].header.Get("X-Lang") == "" {
				t.Fatal("the attacker's bulk call went without X-Lang: the route did not learn it")
			}
			for i := range 2 {
				before := len(o.snapshot())
				a := fetch(t.Context(), e.front.URL+"/users/2", nil)
				if a.code != 200 || a.body != userJSON("2", nil, "X-Lang") {
					t.Fatalf("victim %d: %d %q (%s)", i, a.code, a.body, a.header.Get("Cache-Status"))
				}
				// The first victim's bulk call (without X-Lang) stores;
				// the second reads it.
				if calls, want := len(o.snapshot())-before, 1-i; calls != want {
					t.Errorf("victim %d: %d bulk calls, want %d (%s)", i, calls, want, a.header.Get("Cache-Status"))
				}
			}
			if got := notStoredCount(t, e.reg, "vary-unnamed"); got == 0 {
				t.Errorf("sidecache_batch_not_stored_total{reason=vary-unnamed} = 0")
			}
		})
	}
}

// TestBatchOwnAcceptNotRefused: a route that learned Accept (a per-ID
// fetch's answer said Vary: Accept) still stores bulk answers that do not
// name it: the bulk call's Accept is the sidecar's own application/json,
// the same for every call, not a client's value.
func TestBatchOwnAcceptNotRefused(t *testing.T) {
	o := newBulkOrigin(t, nil, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Vary", "Accept")
		fmt.Fprint(w, `{"id":7}`)
	})
	e := newEnv(t, o.upstream, []testRoute{userRoute(100, time.Millisecond)})
	html := http.Header{"Accept": {"text/html"}}
	// With a query of its own, fetched alone: teaches the route Accept.
	if a := fetch(t.Context(), e.front.URL+"/users/7?x=1", html); a.code != 200 || o.perID.Load() != 2 {
		t.Fatalf("/users/7?x=1: %d, %d per-ID calls, want 200 after learning Accept (2)", a.code, o.perID.Load())
	}
	for i := range 2 {
		before := len(o.snapshot())
		a := fetch(t.Context(), e.front.URL+"/users/8", html)
		if calls, want := len(o.snapshot())-before, 1-i; a.code != 200 || calls != want {
			t.Fatalf("request %d: %d, %d bulk calls, want %d (%s)", i, a.code, calls, want, a.header.Get("Cache-Status"))
		}
	}
	if got := notStoredCount(t, e.reg, "vary-unnamed"); got != 0 {
		t.Errorf("sidecache_batch_not_stored_total{reason=vary-unnamed} = %v, want 0", got)
	}
}
