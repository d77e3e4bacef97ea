package httpcache

import (
	"net/http"
	"testing"
)

var dateSeeds = []string{
	"Sun, 06 Nov 1994 08:49:37 GMT", "Thu, 26 Nov 2026 09:12:43 GMT", "Mon, 01 Jan 0000 00:00:00 GMT",
	"Fri, 31 Dec 9999 23:59:59 GMT", "Thu, 29 Feb 2024 12:00:00 GMT", "Thu, 29 Feb 2023 12:00:00 GMT",
	"Thu, 31 Apr 2024 12:00:00 GMT", "Thu, 00 Apr 2024 12:00:00 GMT", "Thu, 01 Apr 2024 24:00:00 GMT",
	"Thu, 01 Apr 2024 23:60:00 GMT", "Thu, 01 Apr 2024 23:00:60 GMT", "thu, 01 apr 2024 23:00:00 GMT",
	"Xyz, 01 Apr 2024 23:00:00 GMT", "Thu, 01 Abc 2024 23:00:00 GMT", "Thu, 01 Apr 2024 23:00:00 UTC",
	"Thu, 01 Apr 2024 23:00:00 gmt", "Thu, 1 Apr 2024 23:00:00 GMT", "Thu, 01 Apr 2024 3:00:00 GMT",
	"Thu, 0a Apr 2024 23:00:00 GMT", "Thu, 01 Apr 20/4 23:00:00 GMT", "Thu, 01 Apr 2024 23:00:00.5 GMT",
	"Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "", "0", "Thu, 01 Apr +024 23:00:00 GMT",
}

// TestParseDate: ParseDate gives http.ParseTime's verdict and time.
func TestParseDate(t *testing.T) {
	for _, s := range dateSeeds {
		checkParseDate(t, s)
	}
	if _, ok := fixdate("Sun, 06 Nov 1994 08:49:37 GMT"); !ok {
		t.Error("fixdate does not read an IMF-fixdate")
	}
}

// FuzzParseDate holds ParseDate to http.ParseTime on any input.
func FuzzParseDate(f *testing.F) {
	for _, s := range dateSeeds {
		f.Add(s)
	}
	f.Fuzz(checkParseDate)
}

func checkParseDate(t *testing.T, s string) {
	got, err := ParseDate(s)
	want, werr := http.ParseTime(s)
	if (err == nil) != (werr == nil) || !got.Equal(want) {
		t.Fatalf("ParseDate(%q) = %v, %v; http.ParseTime %v, %v", s, got, err, want, werr)
	}
}

func BenchmarkParseDate(b *testing.B) {
	for b.Loop() {
		if _, err := ParseDate("Thu, 26 Nov 2026 09:12:43 GMT"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseTimeStd(b *testing.B) { // http.ParseTime, what ParseDate replaced
	for b.Loop() {
		if _, err := http.ParseTime("Thu, 26 Nov 2026 09:12:43 GMT"); err != nil {
			b.Fatal(err)
		}
	}
}
