package proxy

import (
	"net/http"
	"time"

	"github.com/sidecache/sidecache/internal/httpcache"
)

// The request and response rules of RFC 9110 and 9111 live in
// internal/httpcache; these wrappers keep the names the request path's
// files (proxy.go, exchange.go, pass.go, respond.go) call.

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

// status is this cache's RFC 9211 Cache-Status member (httpcache.CacheStatus
// builds it), in the field names the request path sets.
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
	return httpcache.CacheStatus{Cache: "sidecache", Hit: s.hit, Fwd: s.fwd, FwdStatus: s.fwdStatus, TTL: s.ttl, HasTTL: s.hasTTL,
		Stored: s.stored, Collapsed: s.collapsed, Detail: s.detail}.String()
}
