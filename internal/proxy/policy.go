package proxy

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sidecache/sidecache/internal/httpcache"
)

// The request and response rules of RFC 9110 and 9111 live in
// internal/httpcache; these wrappers keep the names the request path's
// files (proxy.go, exchange.go, pass.go, passloop.go, respond.go) call.

func bypassReason(r *http.Request, keyHeaders []string) string {
	return httpcache.BypassReason(r, keyHeaders)
}

func refreshRequested(r *http.Request) bool { return httpcache.RefreshRequested(r) }

func removeHopHeaders(h http.Header) { httpcache.RemoveHopHeaders(h) }

func notModified(r *http.Request, stored http.Header) bool { return httpcache.NotModified(r, stored) }

func appendCacheStatus(prev, ours string) string { return httpcache.AppendCacheStatus(prev, ours) }

// notModifiedHeaders are the fields a 304 carries over from the stored 200
// (RFC 9110 §15.4.5).
var notModifiedHeaders = [...]string{"Cache-Control", "Content-Location", "Date", "Etag", "Expires", "Last-Modified", "Vary"}

// status builds an RFC 9211 Cache-Status field value for this cache.
type status struct {
	hit       bool
	fwd       string // miss, stale, bypass, method, request, uri-miss
	fwdStatus int
	ttl       time.Duration
	hasTTL    bool
	stored    bool
	collapsed bool
	detail    string
}

func (s status) String() string {
	b := make([]byte, 0, 64)
	b = append(b, "sidecache"...)
	if s.hit {
		b = append(b, "; hit"...)
	}
	if s.fwd != "" {
		b = append(b, "; fwd="...)
		b = append(b, s.fwd...)
	}
	if s.fwdStatus != 0 {
		b = append(b, "; fwd-status="...)
		b = strconv.AppendInt(b, int64(s.fwdStatus), 10)
	}
	if s.hasTTL {
		b = append(b, "; ttl="...)
		b = strconv.AppendInt(b, int64(s.ttl/time.Second), 10)
	}
	if s.stored {
		b = append(b, "; stored"...)
	}
	if s.collapsed {
		b = append(b, "; collapsed"...)
	}
	if s.detail != "" {
		b = append(b, "; detail="...)
		b = append(b, s.detail...)
	}
	return string(b)
}
