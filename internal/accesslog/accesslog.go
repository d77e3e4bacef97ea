// Package accesslog carries what only the proxy knows about a request (the
// route it matched, the time spent waiting for the upstream) to the access
// log middleware that wraps it. The middleware puts an empty Record in the
// request context; the proxy fills it in; the middleware reads it once the
// handler has returned. It is a leaf package so both sides can import it.
package accesslog

import (
	"context"
	"net/url"
	"strings"
	"time"
)

// Record is filled in by the proxy while it serves one request. A request
// runs on one goroutine from the middleware's point of view, but the proxy
// may fill the record from a coalesced or batched flight's goroutine: it
// must finish writing before its handler returns.
type Record struct {
	// Route is the matched route's name; "_pass" for a request no route
	// matched (the metrics' route label).
	Route string
	// Result is the request's result label in sidecache_requests_total
	// (hit, miss, stale, bypass, collapsed, pass); "" until counted.
	Result string
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

// Redacted replaces the value of a redacted query parameter in the log.
const Redacted = "REDACTED"

// RedactQuery returns rawQuery with the value of every parameter named in
// names (compared case-insensitively after percent-decoding the name)
// replaced by Redacted; everything else is kept as the client spelled it,
// so a logged URL is the one that was asked for. Parameters are split on
// "&" only, as net/url does (a ";" is not a separator since Go 1.17).
func RedactQuery(rawQuery string, names []string) string {
	if rawQuery == "" || len(names) == 0 {
		return rawQuery
	}
	var b strings.Builder
	rest := rawQuery
	for first := true; ; first = false {
		pair, tail, more := strings.Cut(rest, "&")
		if !first {
			b.WriteByte('&')
		}
		name, _, hasValue := strings.Cut(pair, "=")
		if dec, err := url.QueryUnescape(name); err == nil {
			name = dec
		}
		if hasValue && redacted(name, names) {
			b.WriteString(pair[:strings.IndexByte(pair, '=')+1])
			b.WriteString(Redacted)
		} else {
			b.WriteString(pair)
		}
		if !more {
			return b.String()
		}
		rest = tail
	}
}

func redacted(name string, names []string) bool {
	for _, n := range names {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}
