package httpcache

import (
	"net/http"
	"reflect"
	"testing"
	"time"
)

func TestCacheableStatus(t *testing.T) {
	tests := []struct {
		code          int
		negative      time.Duration
		wantNeg, want bool
	}{
		{200, 0, false, true},
		{203, 0, false, true},
		{204, 0, false, true},
		{300, 0, false, true},
		{301, 0, false, true},
		{404, 0, true, false},
		{404, time.Minute, true, true},
		{410, time.Minute, true, true},
		{405, time.Minute, false, false},
		{206, 0, false, false},
		{302, 0, false, false},
		{304, 0, false, false},
		{308, 0, false, false},
		{500, time.Minute, false, false},
	}
	for _, tt := range tests {
		neg, ok := CacheableStatus(tt.code, tt.negative)
		if neg != tt.wantNeg || ok != tt.want {
			t.Errorf("CacheableStatus(%d, %v) = %v, %v; want %v, %v", tt.code, tt.negative, neg, ok, tt.wantNeg, tt.want)
		}
	}
}

func TestPrivate(t *testing.T) {
	tests := []struct {
		h    http.Header
		want bool
	}{
		{hdr(), false},
		{hdr("Cache-Control", "public, max-age=60"), false},
		{hdr("Set-Cookie", "a=b"), true},
		{hdr("Set-Cookie2", `a="b"; Version="1"`), true}, // RFC 2965, obsolete but still a cookie
		{hdr("Cache-Control", "private"), true},
		{hdr("Cache-Control", `private="X-A"`), true}, // route mode reads any private as private
		{hdr("Cache-Control", "max-age=1", "Cache-Control", "no-store"), true},
		{hdr("Cache-Control", "no-cache"), false},
		{hdr("CDN-Cache-Control", "private"), false}, // Cache-Control only
		// Spelt with other separators than commas, as NGINX and Varnish
		// still read them (directives.go, strays).
		{hdr("Cache-Control", "private; max-age=0"), true},
		{hdr("Cache-Control", "max-age=60 private"), true},
		{hdr("Cache-Control", "public;no-store"), true},
		{hdr("Cache-Control", "max-age=60;public"), false},
	}
	for _, tt := range tests {
		if got := Private(tt.h); got != tt.want {
			t.Errorf("Private(%v) = %v, want %v", tt.h, got, tt.want)
		}
	}
}

func TestHopAndConditionalHeaders(t *testing.T) {
	for _, k := range []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"} {
		if !IsHopHeader(k) || IsConditionalHeader(k) {
			t.Errorf("%s: hop %v conditional %v", k, IsHopHeader(k), IsConditionalHeader(k))
		}
	}
	for _, k := range []string{"If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since", "If-Range", "Range"} {
		if IsHopHeader(k) || !IsConditionalHeader(k) {
			t.Errorf("%s: hop %v conditional %v", k, IsHopHeader(k), IsConditionalHeader(k))
		}
	}
	for _, k := range []string{"Accept", "Authorization", "connection", "TE"} { // canonical names only
		if IsHopHeader(k) || IsConditionalHeader(k) {
			t.Errorf("%s: hop %v conditional %v", k, IsHopHeader(k), IsConditionalHeader(k))
		}
	}
}

func TestRemoveHopHeaders(t *testing.T) {
	tests := []struct {
		name string
		in   http.Header
		want http.Header
	}{
		{"none", hdr("A", "1"), hdr("A", "1")},
		{"fixed set", hdr("Connection", "close", "Keep-Alive", "x", "Te", "trailers", "Transfer-Encoding", "chunked", "Upgrade", "h2c", "A", "1"), hdr("A", "1")},
		{"named in Connection", hdr("Connection", "X-Hop, ,x-other", "X-Hop", "1", "X-Other", "2", "X-Kept", "3"), hdr("X-Kept", "3")},
		{"several Connection lines", hdr("Connection", "X-A", "Connection", "X-B", "X-A", "1", "X-B", "2"), hdr()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			RemoveHopHeaders(tt.in)
			if !reflect.DeepEqual(tt.in, tt.want) {
				t.Errorf("got %v, want %v", tt.in, tt.want)
			}
		})
	}
}

func TestStoredHeader(t *testing.T) {
	src := hdr("Content-Type", "text/plain", "Content-Length", "5", "Age", "3", "Connection", "X-Hop", "X-Hop", "1",
		"Transfer-Encoding", "chunked", "Cache-Status", "upstream; hit", "Etag", `"a"`)
	got := StoredHeader(src)
	want := hdr("Content-Type", "text/plain", "Cache-Status", "upstream; hit", "Etag", `"a"`)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if src.Get("Age") != "3" || src.Get("X-Hop") != "1" {
		t.Errorf("the source was changed: %v", src)
	}
}

func TestHeaderBytes(t *testing.T) {
	tests := []struct {
		h    http.Header
		want int64
	}{
		{hdr(), 0},
		{hdr("A", "b"), 6},                 // "A: b\r\n"
		{hdr("Ab", "", "Ab", "cd"), 6 + 8}, // two lines
		{hdr("Content-Type", "text/plain"), 12 + 10 + 4},
	}
	for _, tt := range tests {
		if got := HeaderBytes(tt.h); got != tt.want {
			t.Errorf("HeaderBytes(%v) = %d, want %d", tt.h, got, tt.want)
		}
	}
}

func TestKeepFor(t *testing.T) {
	tests := []struct {
		name string
		h    http.Header
		life time.Duration
		want time.Duration
	}{
		{"no validator", hdr(), time.Hour, 0},
		{"no validator, date only", hdr("Date", "Tue, 01 Jan 2026 00:00:00 GMT"), time.Hour, 0},
		{"etag, short life", hdr("Etag", `"a"`), time.Second, MinKeep},
		{"last-modified, zero life", hdr("Last-Modified", "Tue, 01 Jan 2026 00:00:00 GMT"), 0, MinKeep},
		{"between the bounds", hdr("Etag", `"a"`), 30 * time.Minute, 30 * time.Minute},
		{"capped", hdr("Etag", `"a"`), 24 * time.Hour, MaxKeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := KeepFor(tt.h, tt.life); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			if got := HasValidator(tt.h); got != (tt.want > 0) {
				t.Errorf("HasValidator = %v", got)
			}
		})
	}
}

func TestAgeAtRequest(t *testing.T) {
	sent := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	date := func(d time.Duration) string { return sent.Add(d).Format(http.TimeFormat) }
	tests := []struct {
		name  string
		h     http.Header
		delay time.Duration
		want  time.Duration
	}{
		{"nothing", hdr(), 2 * time.Second, 0},
		{"Age, the round trip not counted", hdr("Age", "30"), 2 * time.Second, 30 * time.Second},
		{"apparent age less the round trip", hdr("Date", date(-50*time.Second)), 10 * time.Second, 50 * time.Second},
		{"Date in the future", hdr("Date", date(time.Hour)), time.Second, 0},
		{"received before sent counts no round trip", hdr("Age", "5"), -time.Second, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := AgeAtRequest(tt.h, sent, sent.Add(tt.delay)); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
