package httpcache

import (
	"strconv"
	"time"
)

// CacheStatus is one cache's member of the Cache-Status field (RFC 9211
// §2): the cache's name and the parameters it reports for one response.
type CacheStatus struct {
	Cache string // the member's name, the cache's identifier
	Hit   bool   // §2.1: answered from the cache without going forward
	// Fwd is why the request went forward (§2.2): bypass, method, uri-miss,
	// vary-miss, miss, request, stale, partial; "" when it did not.
	Fwd       string
	FwdStatus int // §2.3: the status the next hop answered; 0: none
	// TTL is the freshness left (§2.4), negative once stale; only with
	// HasTTL.
	TTL       time.Duration
	HasTTL    bool
	Stored    bool   // §2.5: the forwarded response was stored
	Collapsed bool   // §2.6: the request was collapsed with another
	Detail    string // §2.8: a token or an already quoted sf-string
}

// String is the member as it goes on the wire, parameters in the order of
// RFC 9211 §2 ("sidecache; fwd=miss; fwd-status=200; stored").
func (s CacheStatus) String() string {
	b := make([]byte, 0, 64)
	b = append(b, s.Cache...)
	if s.Hit {
		b = append(b, "; hit"...)
	}
	if s.Fwd != "" {
		b = append(b, "; fwd="...)
		b = append(b, s.Fwd...)
	}
	if s.FwdStatus != 0 {
		b = append(b, "; fwd-status="...)
		b = strconv.AppendInt(b, int64(s.FwdStatus), 10)
	}
	if s.HasTTL {
		b = append(b, "; ttl="...)
		// Whole seconds, rounded down: a copy stale by less than a
		// second says ttl=-1, never the 0 of a fresh one (§2.2: a
		// negative ttl is a stale response).
		secs := s.TTL / time.Second
		if s.TTL < 0 && s.TTL%time.Second != 0 {
			secs--
		}
		b = strconv.AppendInt(b, int64(secs), 10)
	}
	if s.Stored {
		b = append(b, "; stored"...)
	}
	if s.Collapsed {
		b = append(b, "; collapsed"...)
	}
	if s.Detail != "" {
		b = append(b, "; detail="...)
		b = append(b, s.Detail...)
	}
	return string(b)
}

// AppendCacheStatus adds this cache's member after the ones caches nearer
// the origin wrote (RFC 9211 §2: the field is a list, origin side first).
func AppendCacheStatus(prev, ours string) string {
	if prev == "" {
		return ours
	}
	return prev + ", " + ours
}
