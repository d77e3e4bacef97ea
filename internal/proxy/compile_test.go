package proxy_test

import (
	"context"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/proxy"
	"github.com/sidecache/sidecache/internal/route"
)

// testRoute is route.Spec with the key defaulting to every query param.
type testRoute = route.Spec

type proxyOptionsAlias = proxy.Options

type atomicBool = atomic.Bool

func compile(t testing.TB, rs []testRoute) *route.Table {
	t.Helper()
	specs := make([]route.Spec, len(rs))
	for i, r := range rs {
		if r.Key.Query == nil && !r.Key.AllQuery {
			r.Key = cachekey.Options{AllQuery: true, Headers: r.Key.Headers}
		}
		specs[i] = r
	}
	tab, err := route.Compile(specs)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// newEnvURL is newEnv against an upstream address that may not answer.
func newEnvURL(t testing.TB, up *upstream, rawURL string, routes []testRoute, opts ...envOpt) *env {
	t.Helper()
	if rawURL == "" {
		return newEnv(t, up, routes, opts...)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	dead := &upstream{}
	dead.Server = nil
	return newEnv(t, dead, routes, append(opts, func(o *proxy.Options, _ *l1.Store) { o.Upstream = u })...)
}

// withL1Invalidator wires invalidation to the test's L1 only.
func withL1Invalidator(o *proxy.Options, s *l1.Store) {
	o.Invalidator = invalidatorFunc(func(ctx context.Context, tags ...string) error {
		s.DeleteTags(tags...)
		return nil
	})
}

type invalidatorFunc func(ctx context.Context, tags ...string) error

func (f invalidatorFunc) InvalidateTags(ctx context.Context, tags ...string) error {
	return f(ctx, tags...)
}
