// Package spans names the OpenTelemetry spans and attributes the proxy
// records (docs/tracing.md lists them for operators), records an error or
// an upstream status on a span, and wraps a cache so that each read and
// write is a span.
//
// It exists apart from the proxy so that the names operators query by are
// declared in one small place, and the traced cache reads alone; and apart
// from internal/tracing, which builds the TracerProvider and the server
// middleware for the wiring and pulls in the SDK and the exporter, which
// the proxy must not.
package spans

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Span names of the proxy's own work, below the request's server span.
const (
	Fill  = "cache.fill"     // one flight, run by its leader
	Fetch = "upstream.fetch" // one upstream call for one key
	Bulk  = "upstream.bulk"  // one bulk call for a batch of ids

	lookup     = "cache.lookup"
	lookupMany = "cache.lookup_many"
	store      = "cache.store"
)

// Attribute keys.
const (
	AttrRoute     = attribute.Key("sidecache.route")
	AttrRefresh   = attribute.Key("sidecache.refresh")
	AttrStored    = attribute.Key("sidecache.stored")
	AttrTooLarge  = attribute.Key("sidecache.too_large")
	AttrBatchSize = attribute.Key("sidecache.batch.size")
	AttrLink      = attribute.Key("sidecache.link") // collapsed or batch
	AttrHTTPRoute = attribute.Key("http.route")
	AttrMethod    = attribute.Key("http.request.method")
	AttrServer    = attribute.Key("server.address")

	attrTier    = attribute.Key("sidecache.cache.tier")   // the tier asked: l1 (the peek) or l2 (L1 re-checked unless nothing can have filled it since the peek, then L2)
	attrResult  = attribute.Key("sidecache.cache.result") // hit, stale, miss, marker, error
	attrFoundIn = attribute.Key("sidecache.cache.found_in")
	attrKeys    = attribute.Key("sidecache.cache.keys")
	attrHits    = attribute.Key("sidecache.cache.hits")
	attrStatus  = attribute.Key("http.response.status_code")
)

// Error records err on sp and marks it failed.
func Error(sp trace.Span, err error) {
	sp.RecordError(err)
	sp.SetStatus(codes.Error, err.Error())
}

// HTTPStatus records an upstream answer's status; 4xx and 5xx mark a
// client span as failed (OpenTelemetry HTTP semantic conventions).
func HTTPStatus(sp trace.Span, code int) {
	sp.SetAttributes(attrStatus.Int(code))
	if code >= 400 {
		sp.SetStatus(codes.Error, "")
	}
}
