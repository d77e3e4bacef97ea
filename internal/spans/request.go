package spans

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Tracer is tp's tracer named name, or nil when tracing is off (no
// provider, or a no-op one): the caller's one nil check then skips every
// span, context and allocation.
func Tracer(tp trace.TracerProvider, name string) trace.Tracer {
	if tp == nil {
		return nil
	}
	if _, ok := tp.(noop.TracerProvider); ok {
		return nil
	}
	return tp.Tracer(name)
}

// NameRoute names ctx's request span after the matched route's pattern
// (low cardinality, as http.route asks) instead of the bare method, and
// records the route's name.
func NameRoute(ctx context.Context, method, pattern, route string) {
	sp := trace.SpanFromContext(ctx)
	if !sp.IsRecording() {
		return
	}
	sp.SetName(method + " " + pattern)
	sp.SetAttributes(AttrHTTPRoute.String(pattern), AttrRoute.String(route))
}

// Inject writes ctx's span as hdr's traceparent (W3C Trace Context §3.2),
// replacing the one a client sent.
func Inject(ctx context.Context, hdr http.Header) {
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(hdr))
}

// Link links ctx's span to to, the span of the call that answered the
// request when it was not the request's own; kind is "collapsed" (it
// waited on another request's flight) or "batch" (its id rode in a bulk
// call).
func Link(ctx context.Context, to trace.SpanContext, kind string) {
	trace.SpanFromContext(ctx).AddLink(trace.Link{SpanContext: to, Attributes: []attribute.KeyValue{AttrLink.String(kind)}})
}
