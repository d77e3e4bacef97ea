package httpcache

import (
	"net/http"
	"reflect"
	"testing"
)

func TestAddConditional(t *testing.T) {
	lm := "Tue, 01 Jan 2026 00:00:00 GMT"
	tests := []struct {
		name   string
		stored http.Header
		want   http.Header
	}{
		{"nothing", hdr("Date", lm), hdr("Accept", "*/*")},
		{"etag", hdr("Etag", `W/"a"`), hdr("Accept", "*/*", "If-None-Match", `W/"a"`)},
		{"last-modified", hdr("Last-Modified", lm), hdr("Accept", "*/*", "If-Modified-Since", lm)},
		{"both", hdr("Etag", `"a"`, "Last-Modified", lm), hdr("Accept", "*/*", "If-None-Match", `"a"`, "If-Modified-Since", lm)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := hdr("Accept", "*/*", "If-None-Match", `"client's"`)
			if tt.stored.Get("Etag") == "" {
				dst.Del("If-None-Match")
			}
			AddConditional(dst, tt.stored)
			if !reflect.DeepEqual(dst, tt.want) {
				t.Errorf("got %v, want %v", dst, tt.want)
			}
		})
	}
}

func TestConfirms(t *testing.T) {
	tests := []struct {
		nm, stored http.Header
		want       bool
	}{
		{hdr(), hdr("Etag", `"a"`), true},
		{hdr("Etag", `"a"`), hdr("Etag", `"a"`), true},
		{hdr("Etag", `"b"`), hdr("Etag", `"a"`), false},
		{hdr("Etag", `"b"`), hdr(), false},
		{hdr("Etag", `W/"b"`), hdr("Etag", `"a"`), true}, // weak: not a selection rule here
	}
	for _, tt := range tests {
		if got := Confirms(tt.nm, tt.stored); got != tt.want {
			t.Errorf("Confirms(%v, %v) = %v, want %v", tt.nm, tt.stored, got, tt.want)
		}
	}
}

func TestFreshen(t *testing.T) {
	tests := []struct {
		name               string
		stored, nm         http.Header
		wantMerged, wantUp http.Header
	}{
		{"fields replaced, others kept",
			hdr("Content-Type", "text/plain", "Cache-Control", "max-age=1", "Etag", `"a"`),
			hdr("Cache-Control", "max-age=60", "Date", "d"),
			hdr("Content-Type", "text/plain", "Cache-Control", "max-age=60", "Etag", `"a"`, "Date", "d"),
			hdr("Cache-Control", "max-age=60", "Date", "d")},
		{"hop-by-hop and Content-Length not applied",
			hdr("Content-Length", "5", "X-A", "1"),
			hdr("Content-Length", "0", "Connection", "X-A", "X-A", "2", "Keep-Alive", "x"),
			hdr("Content-Length", "5", "X-A", "1"),
			hdr()},
		{"the fields of the stored body not applied (§3.2)",
			hdr("Content-Type", "text/plain", "X-A", "1"),
			hdr("Content-Encoding", "gzip", "Content-Type", "application/x-evil", "Content-Range", "bytes 0-1/2", "X-A", "2"),
			hdr("Content-Type", "text/plain", "X-A", "2"),
			hdr("X-A", "2")},
		{"a stored Age dropped",
			hdr("Age", "30", "X-A", "1"), hdr(),
			hdr("X-A", "1"), hdr()},
		{"the 304's Age counts",
			hdr("Age", "30"), hdr("Age", "5"),
			hdr("Age", "5"), hdr("Age", "5")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stored, nm := tt.stored.Clone(), tt.nm.Clone()
			merged, up := Freshen(stored, nm)
			if !reflect.DeepEqual(merged, tt.wantMerged) || !reflect.DeepEqual(up, tt.wantUp) {
				t.Errorf("got %v / %v, want %v / %v", merged, up, tt.wantMerged, tt.wantUp)
			}
			if !reflect.DeepEqual(stored, tt.stored) || !reflect.DeepEqual(nm, tt.nm) {
				t.Error("an argument was changed")
			}
		})
	}
}
