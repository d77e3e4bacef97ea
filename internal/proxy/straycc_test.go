package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/cache/l2"
	"github.com/sidecache/sidecache/internal/proxy"
	"github.com/sidecache/sidecache/internal/redistest"
	"github.com/sidecache/sidecache/internal/route"
)

// An app that marks a per-caller answer private or not to be stored with
// other separators than commas ("private; max-age=0", "max-age=60
// private", "no-cache; no-store") means it as NGINX and Varnish read it:
// such an answer is never stored nor handed to another caller, in either
// freshness mode, from L1 or L2 (httpcache's strays). Before, the
// directive read as an unknown one and the first caller's answer was
// served to the next ones.
func TestStrayPrivateDirectiveIsNotShared(t *testing.T) {
	spellings := []string{
		"private; max-age=0",
		"max-age=60 private",
		"public;private",
		"max-age=60;no-store",
		"no-cache; no-store, max-age=60",
		"no-store;",
	}
	srv := redistest.Start(t)
	for i, cc := range spellings {
		for _, origin := range []bool{false, true} {
			t.Run(fmt.Sprintf("%q/origin=%v", cc, origin), func(t *testing.T) {
				var o *route.Origin
				if origin {
					o = &route.Origin{}
				}
				neverShared(t, srv, fmt.Sprintf("stray%d-%v:", i, origin), http.Header{"Cache-Control": {cc}}, o)
			})
		}
	}
}

// neverShared serves, with the header h, an answer that names the
// caller's address (X-Forwarded-For) on a route in the freshness mode
// origin (nil: route mode), through L1 and an L2 on srv under prefix, to
// callers from three addresses, the first twice: it fails unless each
// gets its own answer and every request reaches the upstream (nothing
// stored).
func neverShared(t *testing.T, srv *redistest.Server, prefix string, h http.Header, origin *route.Origin) {
	t.Helper()
	st, err := l2.New(context.Background(), l2.Options{Addrs: []string{srv.Addr()}, Prefix: prefix, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		for k, v := range h {
			w.Header()[k] = v
		}
		fmt.Fprint(w, "ip="+r.Header.Get("X-Forwarded-For"))
	})
	rt := testRoute{Name: "me", Pattern: "/me/{id}", TTL: time.Minute, Origin: origin}
	e := newEnv(t, up, []testRoute{rt}, func(o *proxy.Options, s *l1.Store) {
		o.Cache = cache.NewTiered(s, st, cache.TieredOptions{})
	})
	ips := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.2"}
	for _, ip := range ips {
		resp, b := getWith(t, from(t, ip), e.front.URL+"/me/1", nil)
		e.l1.Wait()
		if b != "ip="+ip {
			t.Fatalf("caller %s got %q (%s)", ip, b, resp.Header.Get("Cache-Status"))
		}
	}
	if n := up.calls.Load(); n != int64(len(ips)) {
		t.Errorf("%d upstream calls for %d requests, want %d (never stored)", n, len(ips), len(ips))
	}
}

// An answer whose Vary is no list of field names ("Accept-Language
// X-Tenant", "Accept-Encoding;X-Tenant", "X-Tenant;") names each of its
// words (cachekey.ParseVary): every tenant gets the answer made for it,
// stored as its own variant, on a route that forwards every header and on
// one that learns X-Tenant from the Vary and asks once more. Before, the
// answer was keyed on the one name the field spells, which no request
// carries: the first tenant's answer was served to the others from L1
// and L2 (forward_headers: all), or X-Tenant never learned.
func TestMalformedVaryNamesEachWord(t *testing.T) {
	srv := redistest.Start(t)
	for i, vary := range []string{"Accept-Language X-Tenant", "Accept-Encoding;X-Tenant", "X-Tenant;"} {
		for _, all := range []bool{true, false} {
			t.Run(fmt.Sprintf("%q/forward_all=%v", vary, all), func(t *testing.T) {
				st, err := l2.New(context.Background(), l2.Options{Addrs: []string{srv.Addr()}, Prefix: fmt.Sprintf("mvary%d-%v:", i, all), Timeout: 2 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = st.Close() })
				up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Vary", vary)
					fmt.Fprint(w, "tenant="+r.Header.Get("X-Tenant"))
				})
				e := newEnv(t, up, []testRoute{{Name: "t", Pattern: "/t/{id}", TTL: time.Minute, ForwardAll: all}}, func(o *proxy.Options, s *l1.Store) {
					o.Cache = cache.NewTiered(s, st, cache.TieredOptions{})
				})
				for j, tenant := range []string{"acme", "globex", "initech", "acme", "globex"} {
					resp, b := e.do(http.MethodGet, "/t/1", http.Header{"X-Tenant": {tenant}})
					cs := resp.Header.Get("Cache-Status")
					if b != "tenant="+tenant {
						t.Fatalf("tenant %s got %q (%s)", tenant, b, cs)
					}
					if j >= 3 && !strings.Contains(cs, "; hit") {
						t.Errorf("tenant %s's second read: %s, want a hit on its variant", tenant, cs)
					}
				}
				want := int64(3) // one per tenant
				if !all {
					want++ // the first asked once more, with the header it learned
				}
				if n := up.calls.Load(); n != want {
					t.Errorf("%d upstream calls, want %d", n, want)
				}
			})
		}
	}
}
