package proxy

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/route"
)

// Tracing. The request's server span is started outside the proxy (see
// internal/tracing.Handler); the proxy adds, below it, one span per cache
// read ("cache.lookup", per tier), per store ("cache.store"), per flight
// ("cache.fill", run by the flight's leader) and per upstream call
// ("upstream.fetch", "upstream.bulk"). A request that waited on another
// request's flight, or whose id rode in a bulk call, gets a span link to
// the span of that one call: the trace of a slow collapsed request then
// names the call it waited for.
//
// With no TracerProvider (the default) h.tr is nil and every helper here
// returns at its first line: no span, no context, no allocation.

// Span and attribute names; docs/tracing.md lists them for operators.
const (
	spanLookup     = "cache.lookup"
	spanLookupMany = "cache.lookup_many"
	spanStore      = "cache.store"
	spanFill       = "cache.fill"
	spanFetch      = "upstream.fetch"
	spanBulk       = "upstream.bulk"

	attrRoute     = attribute.Key("sidecache.route")
	attrTier      = attribute.Key("sidecache.cache.tier")   // the tier asked: l1 (the peek) or l2 (L1 re-checked, then L2)
	attrResult    = attribute.Key("sidecache.cache.result") // hit, stale, miss, marker, error
	attrFoundIn   = attribute.Key("sidecache.cache.found_in")
	attrKeys      = attribute.Key("sidecache.cache.keys")
	attrHits      = attribute.Key("sidecache.cache.hits")
	attrRefresh   = attribute.Key("sidecache.refresh")
	attrStored    = attribute.Key("sidecache.stored")
	attrTooLarge  = attribute.Key("sidecache.too_large")
	attrBatchSize = attribute.Key("sidecache.batch.size")
	attrLink      = attribute.Key("sidecache.link") // collapsed or batch
	attrHTTPRoute = attribute.Key("http.route")
	attrMethod    = attribute.Key("http.request.method")
	attrStatus    = attribute.Key("http.response.status_code")
	attrServer    = attribute.Key("server.address")
)

// spanLink is the span a flight's waiters link to: its upstream call when
// it made one (the bulk call for a batched id), else the fill itself.
type spanLink = trace.SpanContext

// setTracing takes the tracer from tp (nil or a no-op provider: tracing
// off) and, when on, wraps the cache so each read and write is a span.
func (h *Handler) setTracing(tp trace.TracerProvider) {
	if tp == nil {
		return
	}
	if _, ok := tp.(noop.TracerProvider); ok {
		return
	}
	h.tr = tp.Tracer("github.com/sidecache/sidecache/internal/proxy")
	if h.cache != nil {
		h.cache = tracedCache{Cache: h.cache, tr: h.tr, now: h.now}
	}
}

// traceRoute names the request span after the matched route's pattern
// (low cardinality, as http.route asks) instead of the bare method.
func (h *Handler) traceRoute(r *http.Request, rt *route.Route) {
	if h.tr == nil {
		return
	}
	sp := trace.SpanFromContext(r.Context())
	if !sp.IsRecording() {
		return
	}
	sp.SetName(r.Method + " " + rt.Pattern)
	sp.SetAttributes(attrHTTPRoute.String(rt.Pattern), attrRoute.String(rt.Name))
}

// inject writes the current span as the upstream request's traceparent
// (W3C Trace Context §3.2), replacing the client's: on the cached path the
// upstream's parent is the flight's fetch span, on pass-through the
// request's own span. With tracing off the client's header is forwarded
// as it came.
func (h *Handler) inject(ctx context.Context, hdr http.Header) {
	if h.tr == nil {
		return
	}
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(hdr))
}

// fillTraced is fill inside a "cache.fill" span, which the flight's
// waiters link to when no upstream call was made (the fill found the
// entry in L2, or another replica's).
func (x *exchange) fillTraced(ctx context.Context) (*flight, error) {
	if x.h.tr == nil {
		return x.fill(ctx)
	}
	ctx, sp := x.h.tr.Start(ctx, spanFill, trace.WithAttributes(attrRoute.String(x.rs.rt.Name), attrRefresh.Bool(x.refresh)))
	defer sp.End()
	f, err := x.fill(ctx)
	if err != nil {
		spanError(sp, err)
	}
	if f != nil && !f.link.IsValid() {
		f.link = sp.SpanContext()
	}
	return f, err
}

// fetchTraced is fetch inside an "upstream.fetch" client span, which
// becomes the flight's link; the span is the upstream request's parent.
// On an error it still returns a flight carrying the link, so the waiters
// of a failed fetch see which call failed them.
func (x *exchange) fetchTraced(ctx context.Context) (*flight, error) {
	if x.h.tr == nil {
		return x.fetch(ctx)
	}
	ctx, sp := x.h.tr.Start(ctx, spanFetch, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attrRoute.String(x.rs.rt.Name), attrMethod.String(http.MethodGet), attrServer.String(x.st.up.Host)))
	defer sp.End()
	f, err := x.fetch(ctx)
	switch {
	case err != nil:
		spanError(sp, err)
		f = &flight{}
	case f.large != nil:
		spanStatus(sp, f.large.resp.StatusCode)
		sp.SetAttributes(attrTooLarge.Bool(true))
	default:
		spanStatus(sp, f.c.e.Status)
		sp.SetAttributes(attrStored.Bool(f.stored))
	}
	f.link = sp.SpanContext()
	return f, err
}

// fetchBulkTraced is fetchBulk inside an "upstream.bulk" client span, and
// hands that span to every id's answer: each request of the batch links
// to the one bulk call.
func (x *exchange) fetchBulkTraced(ctx context.Context, ids []string) (map[string]bulkAnswer, error) {
	if x.h.tr == nil {
		return x.fetchBulk(ctx, ids)
	}
	ctx, sp := x.h.tr.Start(ctx, spanBulk, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attrRoute.String(x.rs.rt.Name), attrBatchSize.Int(len(ids)), attrServer.String(x.st.up.Host)))
	defer sp.End()
	res, err := x.fetchBulk(ctx, ids)
	if err != nil {
		spanError(sp, err)
	}
	for id, a := range res {
		a.link = sp.SpanContext()
		res[id] = a
	}
	return res, err
}

// linkFlight links the request's span to the call that answered it, when
// that call was not its own: a collapsed waiter's, or a bulk call's.
func (x *exchange) linkFlight(f *flight, leader bool) {
	if x.h.tr == nil || f == nil || !f.link.IsValid() || leader && !f.batched {
		return
	}
	kind := "collapsed"
	if f.batched {
		kind = "batch"
	}
	trace.SpanFromContext(x.r.Context()).AddLink(trace.Link{SpanContext: f.link, Attributes: []attribute.KeyValue{attrLink.String(kind)}})
}

func spanError(sp trace.Span, err error) {
	sp.RecordError(err)
	sp.SetStatus(codes.Error, err.Error())
}

// spanStatus records an upstream answer's status; 4xx and 5xx mark a
// client span as failed (OpenTelemetry HTTP semantic conventions).
func spanStatus(sp trace.Span, code int) {
	sp.SetAttributes(attrStatus.Int(code))
	if code >= 400 {
		sp.SetStatus(codes.Error, "")
	}
}

// tracedCache makes each cache call a span. It is installed only when
// tracing is on, so the untraced path keeps calling the tiers directly.
type tracedCache struct {
	Cache
	tr  trace.Tracer
	now func() time.Time
}

func (c tracedCache) Lookup(ctx context.Context, key string) (*cache.Entry, cache.Tier, error) {
	ctx, sp := c.tr.Start(ctx, spanLookup, trace.WithAttributes(attrTier.String(string(cache.TierL2))))
	defer sp.End()
	e, t, err := c.Cache.Lookup(ctx, key)
	c.result(sp, e, t, err)
	return e, t, err
}

func (c tracedCache) LookupLocal(ctx context.Context, key string) (*cache.Entry, cache.Tier, error) {
	ctx, sp := c.tr.Start(ctx, spanLookup, trace.WithAttributes(attrTier.String(string(cache.TierL1))))
	defer sp.End()
	e, t, err := c.Cache.LookupLocal(ctx, key)
	c.result(sp, e, t, err)
	return e, t, err
}

func (c tracedCache) LookupMany(ctx context.Context, keys []string) ([]*cache.Entry, []cache.Tier, error) {
	ctx, sp := c.tr.Start(ctx, spanLookupMany, trace.WithAttributes(attrKeys.Int(len(keys))))
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
		spanError(sp, err)
	}
	return es, ts, err
}

func (c tracedCache) Set(ctx context.Context, key string, e *cache.Entry) error {
	ctx, sp := c.tr.Start(ctx, spanStore)
	defer sp.End()
	err := c.Cache.Set(ctx, key, e)
	if err != nil {
		spanError(sp, err)
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
		spanError(sp, err)
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
