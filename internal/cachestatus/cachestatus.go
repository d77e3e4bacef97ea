// Package cachestatus is the sidecar's own member of the Cache-Status
// response field (RFC 9211), in the fields the proxy's request path sets,
// and its wire form (httpcache.CacheStatus builds it).
//
// It exists apart from the proxy because every answer carries a member and
// most carry one of a few: a request that went forward for a miss and got
// a 200 or a 404, batched or not, collapsed or not. Those are made once
// (String looks them up), since building one was an allocation per miss;
// a hit's, whose ttl varies, is kept once made for its tier and ttl. The
// tables and the rules for which members they hold read and test alone.
package cachestatus

import (
	"sync/atomic"
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
// few strings made once (common); a fresh hit's is kept once made (hits).
func (s Member) String() string {
	if i, ok := s.common(); ok {
		return commonMembers[i]
	}
	if tier, secs, ok := s.hit(); ok {
		slot := &hits[tier][secs%hitTTLs]
		if m := slot.Load(); m != nil && m.secs == secs {
			return m.s
		}
		m := &hitMember{secs: secs, s: s.build()}
		slot.Store(m)
		return m.s
	}
	return s.build()
}

// hitTTLs is how many ttls hits keeps per tier: a hit's ttl in whole
// seconds, modulo hitTTLs, is its place.
const hitTTLs = 1024

// hits holds the String of a fresh hit's member per tier (l1, l2) and
// ttl: a hit's member differs from the last one of its tier only when its
// ttl has another whole second, so almost every hit finds its string made
// (an allocation per hit, L1's and L2's, before). A place holds the last
// member made for it, with its ttl, which a lookup checks: ttls hitTTLs
// seconds apart take turns in it, and are still right. At most 2 ×
// hitTTLs short strings are kept.
var hits [2][hitTTLs]atomic.Pointer[hitMember]

type hitMember struct {
	secs int64
	s    string
}

// hit is the place of s in hits: a fresh hit's member (ttl ≥ 0, nothing
// but the tier for detail), whose String depends on its tier and its ttl
// in whole seconds only.
func (s Member) hit() (tier int, secs int64, ok bool) {
	if !s.Hit || !s.HasTTL || s.TTL < 0 || s.Fwd != "" || s.FwdStatus != 0 || s.Stored || s.Collapsed {
		return 0, 0, false
	}
	switch s.Detail {
	case "l1":
	case "l2":
		tier = 1
	default:
		return 0, 0, false
	}
	return tier, int64(s.TTL / time.Second), true
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
