// Package accesslog carries what only the proxy knows about a request (the
// route it matched, the time spent waiting for the upstream) to the access
// log middleware that wraps it. The middleware puts an empty Record in the
// request context; the proxy fills it in; the middleware reads it once the
// handler has returned. It is a leaf package so both sides can import it.
package accesslog

import (
	"context"
	"time"
)

// Record is filled in by the proxy while it serves one request. A request
// runs on one goroutine from the middleware's point of view, but the proxy
// may fill the record from a coalesced or batched flight's goroutine: it
// must finish writing before its handler returns.
type Record struct {
	// Route is the matched route's name; "" for a request no route matched.
	Route string
	// Upstream is the time this request spent on upstream calls it made
	// itself (0 for a hit, or a waiter of someone else's call).
	Upstream time.Duration
	// UpstreamRequestID is the X-Request-Id the sidecar sent on the
	// upstream call whose answer this request got ("" for a hit): the
	// client's own id is never forwarded on the cached path, so the log
	// line holding both is what joins the two.
	UpstreamRequestID string
}

type key struct{}

// WithRecord returns a context carrying a new, empty Record, and the record.
func WithRecord(ctx context.Context) (context.Context, *Record) {
	r := &Record{}
	return context.WithValue(ctx, key{}, r), r
}

// FromContext returns the request's Record, or nil when the access log is
// off (callers must check: filling nothing costs nothing).
func FromContext(ctx context.Context) *Record {
	r, _ := ctx.Value(key{}).(*Record)
	return r
}
