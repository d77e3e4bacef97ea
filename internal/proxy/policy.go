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

// String is the member as it goes on the wire. A member with no ttl, of a
// request that went forward for a miss and got a 200 or a 404 (every
// miss, batched or not, collapsed or not), is one of a few strings made
// once (commonStatuses): building it was an allocation per miss that a
// hit, whose ttl varies, pays anyway.
func (s status) String() string {
	if i, ok := s.common(); ok {
		return commonStatuses[i]
	}
	return s.build()
}

func (s status) build() string {
	return httpcache.CacheStatus{Cache: "sidecache", Hit: s.hit, Fwd: s.fwd, FwdStatus: s.fwdStatus, TTL: s.ttl, HasTTL: s.hasTTL,
		Stored: s.stored, Collapsed: s.collapsed, Detail: s.detail}.String()
}

// commonStatuses holds the String of every common status (see common), at
// its index; read only once made.
var commonStatuses = func() (all [32]string) {
	for i := range all {
		all[i] = commonStatus(i).build()
	}
	return all
}()

// commonStatus is the status at index i of commonStatuses: one bit each
// for the forward reason (miss or request), the upstream's status (200 or
// 404), stored, collapsed and the detail ("" or batch).
func commonStatus(i int) status {
	s := status{fwd: "miss", fwdStatus: 200, stored: i&4 != 0, collapsed: i&8 != 0}
	if i&1 != 0 {
		s.fwd = "request"
	}
	if i&2 != 0 {
		s.fwdStatus = 404
	}
	if i&16 != 0 {
		s.detail = "batch"
	}
	return s
}

// common is s's index in commonStatuses, when it has one.
func (s status) common() (int, bool) {
	if s.hit || s.hasTTL {
		return 0, false
	}
	i := 0
	switch s.fwd {
	case "miss":
	case "request":
		i |= 1
	default:
		return 0, false
	}
	switch s.fwdStatus {
	case 200:
	case 404:
		i |= 2
	default:
		return 0, false
	}
	if s.stored {
		i |= 4
	}
	if s.collapsed {
		i |= 8
	}
	switch s.detail {
	case "":
	case "batch":
		i |= 16
	default:
		return 0, false
	}
	return i, true
}
