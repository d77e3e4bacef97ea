// Package tracing builds the OpenTelemetry TracerProvider from the standard
// OTEL_* environment variables, and the server-side HTTP middleware that
// starts one span per proxied request.
//
// Tracing is off unless the environment asks for it, so that a sidecar
// nobody collects spans from pays nothing: New then returns a nil provider
// and the proxy skips every span. The variables follow the OpenTelemetry
// specification's "Environment Variable Specification" and the OTLP
// exporter's; only the exporter choice is stricter (see New).
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Options name the process in its spans.
type Options struct {
	// ServiceName is service.name unless OTEL_SERVICE_NAME (or
	// service.name in OTEL_RESOURCE_ATTRIBUTES) says otherwise; "" is
	// "sidecache".
	ServiceName string
	Version     string // service.version
	// Getenv reads the on/off variables; nil is os.Getenv. The SDK and
	// the exporter read the rest (endpoint, headers, sampler, batch
	// sizes) from the process environment themselves.
	Getenv func(string) string
}

// Enabled reports whether the environment asks for traces, and an error
// for a setting this build cannot honour (which should stop the start: an
// operator who set it expects spans). Tracing is on when
// OTEL_TRACES_EXPORTER is "otlp", or when it is unset and an OTLP endpoint
// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT) is
// set. OTEL_SDK_DISABLED=true turns it off whatever else is set.
//
// Unlike the specification's default (otlp), an unset exporter with no
// endpoint is off: a sidecar should not post spans to localhost:4318 in
// every pod that never asked for them.
func Enabled(getenv func(string) string) (bool, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	on := false
	switch exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); exp {
	case "none":
		return false, nil
	case "otlp":
		on = true
	case "":
		on = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
	default:
		return false, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q: only otlp and none are supported", exp)
	}
	if !on {
		return false, nil
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if p := strings.ToLower(strings.TrimSpace(proto)); p != "" && p != "http/protobuf" {
		return false, fmt.Errorf("tracing: OTEL_EXPORTER_OTLP_PROTOCOL=%q: only http/protobuf is supported (the collector's port 4318)", proto)
	}
	return true, nil
}

// Endpoint is the URL spans are posted to while tracing is on, as the
// OTLP/HTTP exporter derives it (OTLP exporter specification, "Endpoint
// URLs for OTLP/HTTP"): the traces endpoint as given, else the general
// endpoint with "/v1/traces" appended, else http://localhost:4318/v1/traces.
// The start-up line shows it, so an operator sees where spans go.
func Endpoint(getenv func(string) string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	if e := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")); e != "" {
		return e
	}
	if e := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")); e != "" {
		return strings.TrimSuffix(e, "/") + "/v1/traces"
	}
	return "http://localhost:4318/v1/traces"
}

// New builds the TracerProvider the environment asks for, exporting over
// OTLP/HTTP through a batch span processor. It returns a nil provider and
// a no-op shutdown when tracing is off. shutdown flushes the spans still
// queued and stops the exporter; it gives up when its ctx ends (call it
// within the drain).
func New(ctx context.Context, o Options) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	noShutdown := func(context.Context) error { return nil }
	on, err := Enabled(o.Getenv)
	if err != nil || !on {
		return nil, noShutdown, err
	}
	name := o.ServiceName
	if name == "" {
		name = "sidecache"
	}
	// Later options win: the environment overrides the defaults.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", name), attribute.String("service.version", o.Version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, noShutdown, fmt.Errorf("tracing: resource: %w", err)
	}
	// The exporter reads OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, _HEADERS,
	// _TIMEOUT, _COMPRESSION and _CERTIFICATE; it does not connect here.
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, noShutdown, fmt.Errorf("tracing: otlp exporter: %w", err)
	}
	// With no sampler option the SDK reads OTEL_TRACES_SAMPLER and
	// OTEL_TRACES_SAMPLER_ARG (default parentbased_always_on), and the
	// batch processor OTEL_BSP_*.
	p := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return p, p.Shutdown, nil
}

// Propagator is the one trace-context format spoken on both sides: W3C
// traceparent/tracestate (W3C Trace Context, §3).
func Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

// Handler wraps the proxy's handler so each request gets a server span,
// continuing the client's W3C trace when it sent a traceparent, and
// carrying the Cache-Status the proxy answered with. A nil tp returns next
// itself: no wrapper, no cost.
func Handler(next http.Handler, tp trace.TracerProvider) http.Handler {
	if tp == nil {
		return next
	}
	return otelhttp.NewHandler(cacheStatus(next), "sidecache",
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(Propagator()),
		// Request metrics are sidecache_* on the Prometheus registry.
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
	)
}

// CacheStatusKey is the request span's attribute holding the Cache-Status
// response field (RFC 9211 §2): hit, miss, collapsed, stale, and why.
const CacheStatusKey = attribute.Key("http.response.header.cache-status")

// cacheStatus copies the Cache-Status the proxy wrote onto the request span,
// so a trace search for slow misses or collapsed requests needs no log.
func cacheStatus(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r)
		if cs := w.Header().Get("Cache-Status"); cs != "" {
			trace.SpanFromContext(r.Context()).SetAttributes(CacheStatusKey.StringSlice([]string{cs}))
		}
	})
}

// LogAttr is the trace_id of ctx's span as a log attribute, so an access
// line leads to its trace; the zero Attr, which slog's handlers omit, when
// tracing is off or the span is not sampled (its trace is not exported).
func LogAttr(ctx context.Context) slog.Attr {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsSampled() {
		return slog.Attr{}
	}
	return slog.String("trace_id", sc.TraceID().String())
}
