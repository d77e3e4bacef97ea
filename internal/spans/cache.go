package spans

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sidecache/sidecache/internal/cache"
)

// Cache is the store a traced cache wraps: the proxy's view of the tiers.
type Cache interface {
	Lookup(ctx context.Context, key string) (*cache.Entry, cache.Tier, error)
	LookupLocal(ctx context.Context, key string) (*cache.Entry, cache.Tier, error)
	LookupShared(ctx context.Context, key string) (*cache.Entry, cache.Tier, error)
	LookupMany(ctx context.Context, keys []string) ([]*cache.Entry, []cache.Tier, error)
	Set(ctx context.Context, key string, e *cache.Entry) error
}

// WrapCache makes each call to c a span of tr: "cache.lookup" per tier
// asked, "cache.lookup_many", "cache.store". now tells a fresh entry from
// a stale one. Install it only when tracing is on, so the untraced path
// keeps calling the tiers directly.
func WrapCache(c Cache, tr trace.Tracer, now func() time.Time) Cache {
	return tracedCache{Cache: c, tr: tr, now: now}
}

type tracedCache struct {
	Cache
	tr  trace.Tracer
	now func() time.Time
}

func (c tracedCache) Lookup(ctx context.Context, key string) (*cache.Entry, cache.Tier, error) {
	ctx, sp := c.tr.Start(ctx, lookup, trace.WithAttributes(attrTier.String(string(cache.TierL2))))
	defer sp.End()
	e, t, err := c.Cache.Lookup(ctx, key)
	c.result(sp, e, t, err)
	return e, t, err
}

func (c tracedCache) LookupLocal(ctx context.Context, key string) (*cache.Entry, cache.Tier, error) {
	ctx, sp := c.tr.Start(ctx, lookup, trace.WithAttributes(attrTier.String(string(cache.TierL1))))
	defer sp.End()
	e, t, err := c.Cache.LookupLocal(ctx, key)
	c.result(sp, e, t, err)
	return e, t, err
}

func (c tracedCache) LookupShared(ctx context.Context, key string) (*cache.Entry, cache.Tier, error) {
	ctx, sp := c.tr.Start(ctx, lookup, trace.WithAttributes(attrTier.String(string(cache.TierL2))))
	defer sp.End()
	e, t, err := c.Cache.LookupShared(ctx, key)
	c.result(sp, e, t, err)
	return e, t, err
}

func (c tracedCache) LookupMany(ctx context.Context, keys []string) ([]*cache.Entry, []cache.Tier, error) {
	ctx, sp := c.tr.Start(ctx, lookupMany, trace.WithAttributes(attrKeys.Int(len(keys))))
	defer sp.End()
	es, ts, err := c.Cache.LookupMany(ctx, keys)
	hits := 0
	for _, e := range es {
		if e != nil {
			hits++
		}
	}
	sp.SetAttributes(attrHits.Int(hits))
	if err != nil {
		Error(sp, err)
	}
	return es, ts, err
}

func (c tracedCache) Set(ctx context.Context, key string, e *cache.Entry) error {
	ctx, sp := c.tr.Start(ctx, store)
	defer sp.End()
	err := c.Cache.Set(ctx, key, e)
	if err != nil {
		Error(sp, err)
	}
	return err
}

// result names what a read found: an entry fresh or stale by its own TTL
// (whether it may answer is the fit rule's call, later), a Vary marker, or
// nothing.
func (c tracedCache) result(sp trace.Span, e *cache.Entry, t cache.Tier, err error) {
	r := "miss"
	switch {
	case err != nil:
		r = "error"
		Error(sp, err)
	case e == nil:
	case e.IsVariants():
		r = "marker"
	case e.Fresh(c.now()):
		r = "hit"
	default:
		r = "stale"
	}
	sp.SetAttributes(attrResult.String(r))
	if e != nil {
		sp.SetAttributes(attrFoundIn.String(string(t)))
	}
}
