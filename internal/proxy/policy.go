package proxy

import (
	"time"

	"github.com/sidecache/sidecache/internal/httpcache"
)

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
