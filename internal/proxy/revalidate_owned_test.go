package proxy_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/cache/l2"
	"github.com/sidecache/sidecache/internal/proxy"
	"github.com/sidecache/sidecache/internal/redistest"
)

// bodySpy records the bodies L2 hands out and the bodies given to the
// tiers to keep.
type bodySpy struct {
	proxy.Cache
	mu     sync.Mutex
	looked [][]byte
	kept   [][]byte
}

func (s *bodySpy) saw(e *cache.Entry, tier cache.Tier) {
	if e != nil && len(e.Body) > 0 && tier == cache.TierL2 {
		s.mu.Lock()
		s.looked = append(s.looked, e.Body)
		s.mu.Unlock()
	}
}

func (s *bodySpy) Lookup(ctx context.Context, key string) (*cache.Entry, cache.Tier, error) {
	e, tier, err := s.Cache.Lookup(ctx, key)
	s.saw(e, tier)
	return e, tier, err
}

func (s *bodySpy) LookupShared(ctx context.Context, key string) (*cache.Entry, cache.Tier, error) {
	e, tier, err := s.Cache.LookupShared(ctx, key)
	s.saw(e, tier)
	return e, tier, err
}

func (s *bodySpy) LookupLocal(ctx context.Context, key string) (*cache.Entry, cache.Tier, error) {
	e, tier, err := s.Cache.LookupLocal(ctx, key)
	s.saw(e, tier)
	return e, tier, err
}

func (s *bodySpy) LookupMany(ctx context.Context, keys []string) ([]*cache.Entry, []cache.Tier, error) {
	es, tiers, err := s.Cache.LookupMany(ctx, keys)
	for i, e := range es {
		s.saw(e, tiers[i])
	}
	return es, tiers, err
}

func (s *bodySpy) Set(ctx context.Context, key string, e *cache.Entry) error {
	s.mu.Lock()
	s.kept = append(s.kept, e.Body)
	s.mu.Unlock()
	return s.Cache.Set(ctx, key, e)
}

// An entry read from L2 has a body that is a slice of the Redis reply
// (with the entry's encoded fields and the reply's framing). Revalidated
// by a 304, it is stored again: the copy L1 keeps must have a body of its
// own, or it pins the whole reply, uncharged by Size, for its lifetime
// (Tiered.promote already copies an L2 hit it keeps).
func TestRevalidatedL2EntryOwnsItsBody(t *testing.T) {
	srv := redistest.Start(t)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = w.Write([]byte(strings.Repeat("a body kept ", 20)))
	})
	c := &clock{}
	rt := clientRoute
	rt.TTL, rt.StaleWhileRevalidate = time.Minute, time.Hour
	newL2 := func() *l2.Store {
		st, err := l2.New(context.Background(), l2.Options{Addrs: []string{srv.Addr()}, Prefix: "reval:", Timeout: 2 * time.Second, MaxLag: l2BenchLag})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	// The reader, L1 and L2, serves another's entries once its
	// invalidation channel is proven, and only entries stored after that.
	rst := newL2()
	spy := &bodySpy{}
	r := newEnv(t, up, []testRoute{rt}, withClock(c), func(o *proxy.Options, l1s *l1.Store) {
		spy.Cache = cache.NewTiered(l1s, rst, cache.TieredOptions{MaxLag: l2BenchLag, Proven: rst.Proven, Floor: rst.Floor})
		o.Cache = spy
	})
	waitFor(t, func() bool { return !rst.Proven().IsZero() })
	// The writer stores the entry in L2 only.
	wst := newL2()
	w := newEnv(t, up, []testRoute{rt}, withClock(c), func(o *proxy.Options, _ *l1.Store) {
		o.Cache = cache.NewTiered(nil, wst, cache.TieredOptions{MaxLag: l2BenchLag, Proven: wst.Proven, Floor: wst.Floor})
	})
	// One Host for both replicas: it is part of the key.
	get := func(e *env) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://api.example/clients/1", nil))
		return rec
	}
	get(w)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rc.Close()
	waitFor(t, func() bool { // the writer stores after answering
		keys, err := rc.Keys(context.Background(), "reval:e:*").Result()
		return err == nil && len(keys) > 0
	})
	// The reader finds it stale in L2, answers it and revalidates it.
	c.advance(rt.TTL + time.Second)
	waitFor(t, func() bool {
		get(r)
		spy.mu.Lock()
		defer spy.mu.Unlock()
		return len(spy.kept) > 0
	})
	if up.calls.Load() < 2 {
		t.Fatalf("upstream calls = %d: the reader never revalidated", up.calls.Load())
	}
	spy.mu.Lock()
	defer spy.mu.Unlock()
	if len(spy.looked) == 0 {
		t.Fatal("the reader never read the entry from L2")
	}
	for _, k := range spy.kept {
		for _, l := range spy.looked {
			if len(k) > 0 && &k[0] == &l[0] {
				t.Fatalf("the revalidated entry stored again keeps the L2 reply's body (%d bytes)", len(k))
			}
		}
	}
}
