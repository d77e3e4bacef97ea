package httpcache

import (
	"testing"
	"time"
)

func TestCacheStatusString(t *testing.T) {
	tests := []struct {
		s    CacheStatus
		want string
	}{
		{CacheStatus{Cache: "sidecache"}, "sidecache"},
		{CacheStatus{Cache: "sidecache", Hit: true, TTL: 299 * time.Second, HasTTL: true, Detail: "l1"}, "sidecache; hit; ttl=299; detail=l1"},
		{CacheStatus{Cache: "sidecache", Fwd: "miss", FwdStatus: 200, Stored: true}, "sidecache; fwd=miss; fwd-status=200; stored"},
		{CacheStatus{Cache: "sidecache", Fwd: "miss", FwdStatus: 200, Collapsed: true}, "sidecache; fwd=miss; fwd-status=200; collapsed"},
		{CacheStatus{Cache: "sidecache", Fwd: "stale", TTL: -1500 * time.Millisecond, HasTTL: true, Detail: "stale-if-error"}, "sidecache; fwd=stale; ttl=-2; detail=stale-if-error"},
		{CacheStatus{Cache: "sidecache", Fwd: "stale", TTL: -500 * time.Millisecond, HasTTL: true}, "sidecache; fwd=stale; ttl=-1"},
		{CacheStatus{Cache: "sidecache", Hit: true, TTL: 500 * time.Millisecond, HasTTL: true}, "sidecache; hit; ttl=0"},
		{CacheStatus{Cache: "sidecache", TTL: 5 * time.Second}, "sidecache"}, // TTL only with HasTTL
		{CacheStatus{Cache: "sidecache", HasTTL: true}, "sidecache; ttl=0"},
		{CacheStatus{Cache: "c", Hit: true, Fwd: "request", FwdStatus: 304, TTL: time.Second, HasTTL: true, Stored: true, Collapsed: true, Detail: `"split hits=1 misses=2"`},
			`c; hit; fwd=request; fwd-status=304; ttl=1; stored; collapsed; detail="split hits=1 misses=2"`},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("%+v: got %q, want %q", tt.s, got, tt.want)
		}
	}
}

func TestAppendCacheStatus(t *testing.T) {
	tests := []struct{ prev, ours, want string }{
		{"", "sidecache; hit", "sidecache; hit"},
		{"origin; fwd=miss", "sidecache; hit", "origin; fwd=miss, sidecache; hit"},
		{"a, b", "c", "a, b, c"},
	}
	for _, tt := range tests {
		if got := AppendCacheStatus(tt.prev, tt.ours); got != tt.want {
			t.Errorf("AppendCacheStatus(%q, %q) = %q, want %q", tt.prev, tt.ours, got, tt.want)
		}
	}
}
