// Package cachestatus is the sidecar's own member of the Cache-Status
// response field (RFC 9211), in the fields the proxy's request path sets,
// and its wire form (httpcache.CacheStatus builds it).
//
// It exists apart from the proxy because every answer carries a member and
// most carry one of a few: a request that went forward for a miss and got
// a 200 or a 404, batched or not, collapsed or not. Those are made once
// (String looks them up), since building one was an allocation per miss
// that only a hit, whose ttl varies, must pay; that table and the rule for
// which members it holds read and test alone.
package cachestatus

import (
	"time"

	"github.com/sidecache/sidecache/internal/httpcache"
)

// Name is the cache's name in its member (RFC 9211 §2).
const Name = "sidecache"

// Member is this cache's Cache-Status member.
type Member struct {
	Hit       bool
	Fwd       string // miss, stale, bypass, method, request, uri-miss
	FwdStatus int
	TTL       time.Duration
	HasTTL    bool
	Stored    bool
	Collapsed bool
	Detail    string
}

// String is the member as it goes on the wire. A member with no ttl, of a
// request that went forward for a miss and got a 200 or a 404, is one of a
// few strings made once (common).
func (s Member) String() string {
	if i, ok := s.common(); ok {
		return commonMembers[i]
	}
	return s.build()
}

func (s Member) build() string {
	return httpcache.CacheStatus{Cache: Name, Hit: s.Hit, Fwd: s.Fwd, FwdStatus: s.FwdStatus, TTL: s.TTL, HasTTL: s.HasTTL,
		Stored: s.Stored, Collapsed: s.Collapsed, Detail: s.Detail}.String()
}

// commonMembers holds the String of every common member (see common), at
// its index; read only once made.
var commonMembers = func() (all [32]string) {
	for i := range all {
		all[i] = commonMember(i).build()
	}
	return all
}()

// commonMember is the member at index i of commonMembers: one bit each
// for the forward reason (miss or request), the upstream's status (200 or
// 404), stored, collapsed and the detail ("" or batch).
func commonMember(i int) Member {
	s := Member{Fwd: "miss", FwdStatus: 200, Stored: i&4 != 0, Collapsed: i&8 != 0}
	if i&1 != 0 {
		s.Fwd = "request"
	}
	if i&2 != 0 {
		s.FwdStatus = 404
	}
	if i&16 != 0 {
		s.Detail = "batch"
	}
	return s
}

// common is s's index in commonMembers, when it has one.
func (s Member) common() (int, bool) {
	if s.Hit || s.HasTTL {
		return 0, false
	}
	i := 0
	switch s.Fwd {
	case "miss":
	case "request":
		i |= 1
	default:
		return 0, false
	}
	switch s.FwdStatus {
	case 200:
	case 404:
		i |= 2
	default:
		return 0, false
	}
	if s.Stored {
		i |= 4
	}
	if s.Collapsed {
		i |= 8
	}
	switch s.Detail {
	case "":
	case "batch":
		i |= 16
	default:
		return 0, false
	}
	return i, true
}
