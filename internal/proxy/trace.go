package proxy

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/trace"

	"github.com/sidecache/sidecache/internal/bulkanswer"
	"github.com/sidecache/sidecache/internal/route"
	"github.com/sidecache/sidecache/internal/spans"
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
// returns at its first line: no span, no context, no allocation. The span
// and attribute names, and the traced cache, are internal/spans'.

// spanLink is the span a flight's waiters link to: its upstream call when
// it made one (the bulk call for a batched id), else the fill itself.
type spanLink = trace.SpanContext

// setTracing takes the tracer from tp (nil or a no-op provider: tracing
// off) and, when on, wraps the cache so each read and write is a span.
func (h *Handler) setTracing(tp trace.TracerProvider) {
	h.tr = spans.Tracer(tp, "github.com/sidecache/sidecache/internal/proxy")
	if h.tr != nil && h.cache != nil {
		h.cache = spans.WrapCache(h.cache, h.tr, h.now)
	}
}

// traceRoute names the request span after the matched route
// (spans.NameRoute).
func (h *Handler) traceRoute(r *http.Request, rt *route.Route) {
	if h.tr != nil {
		spans.NameRoute(r.Context(), r.Method, rt.Pattern, rt.Name)
	}
}

// inject writes the current span as the upstream request's traceparent,
// replacing the client's: on the cached path the upstream's parent is the
// flight's fetch span, on pass-through the request's own span. With
// tracing off the client's header is forwarded as it came.
func (h *Handler) inject(ctx context.Context, hdr http.Header) {
	if h.tr != nil {
		spans.Inject(ctx, hdr)
	}
}

// fillTraced is fill inside a "cache.fill" span, which the flight's
// waiters link to when no upstream call was made (the fill found the
// entry in L2, or another replica's).
func (x *exchange) fillTraced(ctx context.Context) (*flight, error) {
	if x.h.tr == nil {
		return x.fill(ctx)
	}
	ctx, sp := x.h.tr.Start(ctx, spans.Fill, trace.WithAttributes(spans.AttrRoute.String(x.rs.rt.Name), spans.AttrRefresh.Bool(x.refresh)))
	defer sp.End()
	f, err := x.fill(ctx)
	if err != nil {
		spans.Error(sp, err)
	}
	if f != nil && (f.link == nil || !f.link.IsValid()) {
		link := sp.SpanContext()
		f.link = &link
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
	ctx, sp := x.h.tr.Start(ctx, spans.Fetch, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		spans.AttrRoute.String(x.rs.rt.Name), spans.AttrMethod.String(http.MethodGet), spans.AttrServer.String(x.st.up.Host)))
	defer sp.End()
	f, err := x.fetch(ctx)
	switch {
	case err != nil:
		spans.Error(sp, err)
		f = &flight{}
	case f.large != nil:
		spans.HTTPStatus(sp, f.large.Resp.StatusCode)
		sp.SetAttributes(spans.AttrTooLarge.Bool(true))
	default:
		spans.HTTPStatus(sp, f.c.e.Status)
		sp.SetAttributes(spans.AttrStored.Bool(f.stored))
	}
	link := sp.SpanContext()
	f.link = &link
	return f, err
}

// fetchBulkTraced is fetchBulk inside an "upstream.bulk" client span, and
// hands that span to every id's answer: each request of the batch links
// to the one bulk call.
func (x *exchange) fetchBulkTraced(ctx context.Context, ids []string) ([]*bulkanswer.Answer, error) {
	if x.h.tr == nil {
		return x.fetchBulk(ctx, ids)
	}
	ctx, sp := x.h.tr.Start(ctx, spans.Bulk, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		spans.AttrRoute.String(x.rs.rt.Name), spans.AttrBatchSize.Int(len(ids)), spans.AttrServer.String(x.st.up.Host)))
	defer sp.End()
	res, err := x.fetchBulk(ctx, ids)
	if err != nil {
		spans.Error(sp, err)
	}
	for _, a := range res {
		if a.Call == nil {
			a.Call = &bulkanswer.Call{}
		}
		a.Call.Link = sp.SpanContext() // the same call for every id
	}
	return res, err
}

// linkFlight links the request's span to the call that answered it, when
// that call was not its own: a collapsed waiter's, or a bulk call's.
func (x *exchange) linkFlight(f *flight, leader bool) {
	if x.h.tr == nil || f == nil || f.link == nil || !f.link.IsValid() || leader && !f.batched {
		return
	}
	kind := "collapsed"
	if f.batched {
		kind = "batch"
	}
	spans.Link(x.r.Context(), *f.link, kind)
}
