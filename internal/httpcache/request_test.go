package httpcache

import (
	"net/http"
	"testing"
	"time"
)

func req(kv ...string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "http://example.com/a", nil)
	r.Header = hdr(kv...)
	return r
}

func TestHasDirective(t *testing.T) {
	tests := []struct {
		h    http.Header
		d    string
		want bool
	}{
		{hdr(), "no-cache", false},
		{hdr("Cache-Control", "no-cache"), "no-cache", true},
		{hdr("Cache-Control", "NO-CACHE"), "no-cache", true},
		{hdr("Cache-Control", "max-age=5, private"), "private", true},
		{hdr("Cache-Control", `private="Set-Cookie"`), "private", true},
		{hdr("Cache-Control", " private = x "), "private", true},
		{hdr("Cache-Control", "max-age=5", "Cache-Control", "no-store"), "no-store", true},
		{hdr("Cache-Control", "no-storex, xno-store"), "no-store", false},
		{hdr("Cache-Control", ",,"), "no-store", false},
		{hdr("Pragma", "no-cache"), "no-cache", false}, // Cache-Control only
		// Stray words (directives.go): other separators than commas.
		{hdr("Cache-Control", "private; max-age=0"), "private", true},
		{hdr("Cache-Control", "max-age=60 private"), "private", true},
		{hdr("Cache-Control", "max-age=0;no-store"), "no-store", true},
		{hdr("Cache-Control", "no-cache; no-store"), "no-store", true},
		{hdr("Cache-Control", "no-store;"), "no-store", true},
		{hdr("Cache-Control", "public max-age=60"), "max-age", false}, // as before: no directive
		{hdr("Cache-Control", "max-age=60 public"), "public", false},  // strays restrict only
		{hdr("Cache-Control", "max-age=60 x-private"), "private", false},
		{hdr("Cache-Control", "private_data=1"), "private", false},
	}
	for _, tt := range tests {
		if got := HasDirective(tt.h, tt.d); got != tt.want {
			t.Errorf("HasDirective(%v, %q) = %v, want %v", tt.h, tt.d, got, tt.want)
		}
	}
}

func TestBypassReason(t *testing.T) {
	tests := []struct {
		name  string
		r     *http.Request
		keyed []string
		want  string
	}{
		{"plain", req(), nil, ""},
		{"authorization", req("Authorization", "Bearer x"), nil, "authorization"},
		{"authorization keyed", req("Authorization", "Bearer x"), []string{"authorization"}, ""},
		{"cookie", req("Cookie", "a=b"), []string{"Authorization"}, "cookie"},
		{"cookie keyed", req("Cookie", "a=b"), []string{"Cookie"}, ""},
		{"authorization before cookie", req("Cookie", "a=b", "Authorization", "x"), nil, "authorization"},
		{"range", req("Range", "bytes=0-1"), nil, "range"},
		{"range even when keyed", req("Range", "bytes=0-1"), []string{"Range"}, "range"},
		{"if-match", req("If-Match", `"a"`), nil, "precondition"},
		{"if-unmodified-since", req("If-Unmodified-Since", "Tue, 01 Jan 2026 00:00:00 GMT"), nil, "precondition"},
		{"if-none-match is answered", req("If-None-Match", `"a"`), nil, ""},
		{"no-store", req("Cache-Control", "no-store"), nil, "no-store"},
		{"no-cache is a refresh, not a bypass", req("Cache-Control", "no-cache"), nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := BypassReason(tt.r, tt.keyed); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRefreshRequested(t *testing.T) {
	tests := []struct {
		r    *http.Request
		want bool
	}{
		{req(), false},
		{req("Cache-Control", "no-cache"), true},
		{req("Cache-Control", "max-age=0, No-Cache"), true},
		{req("Cache-Control", "max-age=0"), false},
		{req("Pragma", " no-cache "), true},
		{req("Pragma", "NO-CACHE"), true},
		{req("Pragma", "no-cache", "Cache-Control", "max-age=5"), false}, // §5.4: Cache-Control wins
		{req("Pragma", "x"), false},
	}
	for _, tt := range tests {
		if got := RefreshRequested(tt.r); got != tt.want {
			t.Errorf("RefreshRequested(%v) = %v, want %v", tt.r.Header, got, tt.want)
		}
	}
}

func TestSafeMethod(t *testing.T) {
	for m, want := range map[string]bool{
		"GET": true, "HEAD": true, "OPTIONS": true, "TRACE": true,
		"POST": false, "PUT": false, "PATCH": false, "DELETE": false, "get": false, "": false,
	} {
		if got := SafeMethod(m); got != want {
			t.Errorf("SafeMethod(%q) = %v, want %v", m, got, want)
		}
	}
}

func TestNotModified(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) string { return t0.Add(d).Format(http.TimeFormat) }
	tests := []struct {
		name   string
		r      *http.Request
		stored http.Header
		want   bool
	}{
		{"unconditional", req(), hdr("Etag", `"a"`), false},
		{"etag match", req("If-None-Match", `"a"`), hdr("Etag", `"a"`), true},
		{"etag mismatch", req("If-None-Match", `"b"`), hdr("Etag", `"a"`), false},
		{"weak against strong", req("If-None-Match", `W/"a"`), hdr("Etag", `"a"`), true},
		{"strong against weak", req("If-None-Match", `"a"`), hdr("Etag", `W/"a"`), true},
		{"one of a list", req("If-None-Match", `"x", W/"a" ,"y"`), hdr("Etag", `"a"`), true},
		{"star", req("If-None-Match", " * "), hdr(), true},
		{"no stored etag", req("If-None-Match", `"a"`), hdr("Last-Modified", at(0)), false},
		{"if-none-match wins over ims", req("If-None-Match", `"b"`, "If-Modified-Since", at(time.Hour)), hdr("Etag", `"a"`, "Last-Modified", at(0)), false},
		{"not modified since", req("If-Modified-Since", at(0)), hdr("Last-Modified", at(0)), true},
		{"modified since", req("If-Modified-Since", at(0)), hdr("Last-Modified", at(time.Second)), false},
		{"date stands in", req("If-Modified-Since", at(time.Hour)), hdr("Date", at(0)), true},
		// A Date names a second, not a version: an answer made after a
		// write in the same second as the client's copy shares it.
		{"date of the same second", req("If-Modified-Since", at(0)), hdr("Date", at(0)), false},
		{"date a second before", req("If-Modified-Since", at(time.Second)), hdr("Date", at(0)), true},
		// Every If-None-Match line counts (RFC 9110 §5.3): an empty
		// first one neither hides a matching tag nor hands the verdict
		// to If-Modified-Since.
		{"etag on a later line", req("If-None-Match", "", "If-None-Match", `"b", "a"`), hdr("Etag", `"a"`), true},
		{"etag list over lines", req("If-None-Match", `"x"`, "If-None-Match", `W/"a"`), hdr("Etag", `"a"`), true},
		{"empty first line, ims matches", req("If-None-Match", "", "If-None-Match", `"b"`, "If-Modified-Since", at(time.Hour)), hdr("Etag", `"a"`, "Last-Modified", at(0)), false},
		{"star on a later line", req("If-None-Match", `"x"`, "If-None-Match", "*"), hdr("Etag", `"a"`), true},
		{"two ims lines", req("If-Modified-Since", at(time.Hour), "If-Modified-Since", at(time.Hour)), hdr("Last-Modified", at(0)), false},
		{"last-modified before date", req("If-Modified-Since", at(0)), hdr("Last-Modified", at(0), "Date", at(time.Hour)), true},
		{"no validator", req("If-Modified-Since", at(0)), hdr(), false},
		{"junk ims", req("If-Modified-Since", "yesterday"), hdr("Last-Modified", at(0)), false},
		{"junk last-modified", req("If-Modified-Since", at(0)), hdr("Last-Modified", "yesterday"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NotModified(tt.r, tt.stored); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestETagMatchWeak(t *testing.T) {
	tests := []struct {
		list, etag string
		want       bool
	}{
		{`"a"`, `"a"`, true},
		{`W/"a"`, `W/"a"`, true},
		{`"a"`, `W/"a"`, true},
		{`"a", "b"`, `"b"`, true},
		{`"a","b"`, `"c"`, false},
		{`"A"`, `"a"`, false}, // opaque tags are case-sensitive
		{``, `"a"`, false},
		{`a`, `"a"`, false},
	}
	for _, tt := range tests {
		if got := etagMatchWeak(tt.list, tt.etag); got != tt.want {
			t.Errorf("etagMatchWeak(%q, %q) = %v, want %v", tt.list, tt.etag, got, tt.want)
		}
	}
}

// Issue 20 item 8: an empty first Cookie or Authorization line does not
// hide a credential on a later one.
func TestBypassReasonReadsEveryLine(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"Cookie", []string{"", "session=a"}, "cookie"},
		{"Cookie", []string{" \t", "", "session=a"}, "cookie"},
		{"Cookie", []string{""}, ""},
		{"Authorization", []string{"", "Bearer x"}, "authorization"},
		{"Range", []string{"", "bytes=0-1"}, "range"},
		{"If-Match", []string{"", `"1"`}, "precondition"},
	} {
		r := &http.Request{Header: http.Header{tc.name: tc.lines}}
		if got := BypassReason(r, nil); got != tc.want {
			t.Errorf("%s %q: %q, want %q", tc.name, tc.lines, got, tc.want)
		}
	}
	r := &http.Request{Header: http.Header{"Cookie": {"", "session=a"}}}
	if got := BypassReason(r, []string{"Cookie"}); got != "" {
		t.Errorf("keyed Cookie: %q", got)
	}
}
