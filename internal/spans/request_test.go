package spans_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/sidecache/sidecache/internal/spans"
)

func recorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// Tracing off is a nil tracer, whatever form "off" took.
func TestTracerOff(t *testing.T) {
	if spans.Tracer(nil, "x") != nil {
		t.Error("nil provider: tracer not nil")
	}
	if spans.Tracer(noop.NewTracerProvider(), "x") != nil {
		t.Error("no-op provider: tracer not nil")
	}
	tp, _ := recorder(t)
	if spans.Tracer(tp, "x") == nil {
		t.Error("SDK provider: nil tracer")
	}
}

func TestNameRouteLinkInject(t *testing.T) {
	tp, exp := recorder(t)
	tr := spans.Tracer(tp, "test")
	_, other := tr.Start(context.Background(), "other")
	other.End()
	ctx, sp := tr.Start(context.Background(), "GET")
	spans.NameRoute(ctx, "GET", "/items/{id}", "items")
	spans.Link(ctx, other.SpanContext(), "collapsed")
	hdr := http.Header{"Traceparent": {"00-clients-own"}}
	spans.Inject(ctx, hdr)
	sp.End()

	if tp := hdr.Get("Traceparent"); !strings.Contains(tp, sp.SpanContext().TraceID().String()) || !strings.Contains(tp, sp.SpanContext().SpanID().String()) {
		t.Errorf("traceparent %q does not name the span", tp)
	}
	got := exp.GetSpans()
	if len(got) != 2 {
		t.Fatalf("%d spans, want 2", len(got))
	}
	s := got[1]
	if s.Name != "GET /items/{id}" {
		t.Errorf("name %q", s.Name)
	}
	attrs := map[string]string{}
	for _, a := range s.Attributes {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	if attrs["http.route"] != "/items/{id}" || attrs["sidecache.route"] != "items" {
		t.Errorf("attributes %v", attrs)
	}
	if len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != other.SpanContext().SpanID() ||
		len(s.Links[0].Attributes) != 1 || s.Links[0].Attributes[0].Value.Emit() != "collapsed" {
		t.Errorf("links %+v", s.Links)
	}
}

// A span that does not record is left alone (no work on the hot path).
func TestNameRouteNotRecording(t *testing.T) {
	ctx := trace.ContextWithSpan(context.Background(), noop.Span{})
	spans.NameRoute(ctx, "GET", "/x", "x") // must not panic
}
