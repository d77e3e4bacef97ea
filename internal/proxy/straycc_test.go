package proxy_test

import (
	"context"
	"fmt"
	"net/http"
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
				st, err := l2.New(context.Background(), l2.Options{Addrs: []string{srv.Addr()}, Prefix: fmt.Sprintf("stray%d-%v:", i, origin), Timeout: 2 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = st.Close() })
				up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Cache-Control", cc)
					fmt.Fprint(w, "ip="+r.Header.Get("X-Forwarded-For"))
				})
				rt := testRoute{Name: "me", Pattern: "/me/{id}", TTL: time.Minute}
				if origin {
					rt.Origin = &route.Origin{}
				}
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
			})
		}
	}
}
