package httpcache

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseValue(t *testing.T) {
	s := func(n int) Delta { return Delta{Set: true, D: time.Duration(n) * time.Second} }
	tests := []struct {
		in   string
		want Directives
	}{
		{"", Directives{}},
		{"max-age=60", Directives{MaxAge: s(60), Any: true}},
		{"MAX-AGE=60, Public", Directives{MaxAge: s(60), Public: true, Any: true}},
		{`max-age="60"`, Directives{MaxAge: s(60), Any: true}},
		{"max-age=60, max-age=10", Directives{MaxAge: s(60), Any: true}}, // first occurrence
		{"max-age=abc", Directives{MaxAge: s(0), Any: true}},             // invalid: stale
		{"max-age=-1", Directives{MaxAge: s(0), Any: true}},
		{"max-age", Directives{MaxAge: s(0), Any: true}},
		{"max-age=99999999999999999999", Directives{MaxAge: Delta{true, MaxDelta}, Any: true}},
		{"s-maxage=5, must-revalidate, proxy-revalidate", Directives{SMaxAge: s(5), MustRevalidate: true, ProxyRevalidate: true, Any: true}},
		{`no-cache="Set-Cookie, X-A", private="x-b"`, Directives{NoCache: true, NoCacheFields: []string{"Set-Cookie", "X-A"}, Private: true, PrivateFields: []string{"X-B"}, Any: true}},
		{`no-cache, no-store`, Directives{NoCache: true, NoCacheAll: true, NoStore: true, Any: true}},
		{`private, private="X-A"`, Directives{Private: true, PrivateAll: true, PrivateFields: []string{"X-A"}, Any: true}},
		{`stale-while-revalidate=30,stale-if-error=600`, Directives{StaleWhileRevalidate: s(30), StaleIfError: s(600), Any: true}},
		{`max-stale`, Directives{MaxStale: Delta{true, MaxDelta}, Any: true}},
		{`max-stale=5, min-fresh=3, only-if-cached`, Directives{MaxStale: s(5), MinFresh: s(3), OnlyIfCached: true, Any: true}},
		{`foo="a,b\"c", max-age=7`, Directives{MaxAge: s(7), Any: true}},
		{`,,, ;;, max-age=7 ,`, Directives{MaxAge: s(7), Any: true}},
		{`x="unterminated, max-age=7`, Directives{Any: true}},
		// Strays (directives.go): the restrictive words of an element spelt
		// with other separators than commas; the rest as before.
		{`private; max-age=0`, Directives{Private: true, PrivateAll: true, Any: true}},
		{`max-age=60 private`, Directives{Private: true, PrivateAll: true, MaxAge: s(0), Any: true}},
		{`max-age=60;no-store`, Directives{NoStore: true, MaxAge: s(0), Any: true}},
		{`no-cache; no-store`, Directives{NoCache: true, NoCacheAll: true, NoStore: true, Any: true}},
		{`no-store;`, Directives{NoStore: true, Any: true}},
		{`no-cache="Set-Cookie";private`, Directives{NoCache: true, NoCacheFields: []string{"Set-Cookie"}, Private: true, PrivateAll: true, Any: true}},
		{`max-age=60 public`, Directives{MaxAge: s(0), Any: true}}, // a stray never makes an answer more cacheable
		{`public; max-age=60`, Directives{Any: true}},              // as before: an unknown directive
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := ParseValue(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestEvaluate(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	date := now.Format(http.TimeFormat)
	at := func(d time.Duration) string { return now.Add(d).Format(http.TimeFormat) }
	tests := []struct {
		name string
		h    http.Header
		opts Options
		want Freshness
	}{
		{"max-age", hdr("Cache-Control", "max-age=60"), Options{}, Freshness{Lifetime: time.Minute, Explicit: true}},
		{"s-maxage over max-age", hdr("Cache-Control", "max-age=60, s-maxage=10"), Options{}, Freshness{Lifetime: 10 * time.Second, Explicit: true, NoStale: true}},
		{"max-age over Expires", hdr("Cache-Control", "max-age=60", "Date", date, "Expires", at(time.Hour)), Options{}, Freshness{Lifetime: time.Minute, Explicit: true}},
		{"Expires minus Date", hdr("Date", date, "Expires", at(time.Hour)), Options{}, Freshness{Lifetime: time.Hour, Explicit: true}},
		{"Expires without Date uses received", hdr("Expires", at(time.Hour)), Options{}, Freshness{Lifetime: time.Hour, Explicit: true}},
		{"Expires invalid is past", hdr("Date", date, "Expires", "0"), Options{}, Freshness{Explicit: true}},
		{"Expires in the past", hdr("Date", date, "Expires", at(-time.Hour)), Options{}, Freshness{Explicit: true}},
		{"heuristic 10%", hdr("Date", date, "Last-Modified", at(-10*time.Hour)), Options{}, Freshness{Lifetime: time.Hour}},
		{"heuristic capped", hdr("Date", date, "Last-Modified", at(-1000*time.Hour)), Options{}, Freshness{Lifetime: HeuristicCap}},
		{"heuristic fixed", hdr("Date", date), Options{Heuristic: time.Minute}, Freshness{Lifetime: time.Minute}},
		{"no freshness at all", hdr("Date", date), Options{}, Freshness{}},
		{"swr sie", hdr("Cache-Control", "max-age=1, stale-while-revalidate=30, stale-if-error=60"), Options{}, Freshness{Lifetime: time.Second, Explicit: true, StaleWhileRevalidate: 30 * time.Second, StaleIfError: time.Minute}},
		{"must-revalidate drops stale windows", hdr("Cache-Control", "max-age=1, must-revalidate, stale-if-error=60"), Options{}, Freshness{Lifetime: time.Second, Explicit: true, NoStale: true}},
		{"no-cache", hdr("Cache-Control", "no-cache, max-age=60"), Options{}, Freshness{Lifetime: time.Minute, Explicit: true, NoCache: true}},
		{"qualified no-cache", hdr("Cache-Control", `no-cache="X-A", max-age=60`), Options{}, Freshness{Lifetime: time.Minute, Explicit: true, NoCacheFields: []string{"X-A"}}},
		{"CDN-Cache-Control wins", hdr("Cache-Control", "private, max-age=5", "CDN-Cache-Control", "max-age=600", "Expires", "0"), Options{}, Freshness{Lifetime: 10 * time.Minute, Explicit: true, Field: "CDN-Cache-Control"}},
		{"Surrogate-Control", hdr("Cache-Control", "max-age=5", "Surrogate-Control", "max-age=100"), Options{}, Freshness{Lifetime: 100 * time.Second, Explicit: true, Field: "Surrogate-Control"}},
		{"targets empty: Cache-Control only", hdr("Cache-Control", "max-age=5", "CDN-Cache-Control", "max-age=600"), Options{Targets: []string{}}, Freshness{Lifetime: 5 * time.Second, Explicit: true}},
		{"own target first", hdr("CDN-Cache-Control", "max-age=600", "Sidecache-Cache-Control", "max-age=9"), Options{Targets: []string{"Sidecache-Cache-Control", "CDN-Cache-Control"}}, Freshness{Lifetime: 9 * time.Second, Explicit: true, Field: "Sidecache-Cache-Control"}},
		{"public with the heuristic", hdr("Cache-Control", "public", "Date", date, "Last-Modified", at(-10*time.Hour)), Options{}, Freshness{Lifetime: time.Hour, Public: true}},
		{"empty target ignored", hdr("Cache-Control", "max-age=5", "CDN-Cache-Control", ""), Options{}, Freshness{Lifetime: 5 * time.Second, Explicit: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want.Field == "" {
				tt.want.Field = "Cache-Control"
			}
			got := Evaluate(tt.h, now, tt.opts)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestInitialAge(t *testing.T) {
	req := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name    string
		h       http.Header
		delay   time.Duration
		wantAge time.Duration
	}{
		{"nothing", hdr(), 0, 0},
		{"Age kept", hdr("Age", "30"), 0, 30 * time.Second},
		{"Age plus the round trip", hdr("Age", "30"), 2 * time.Second, 32 * time.Second},
		{"apparent age from Date", hdr("Date", req.Add(-50*time.Second).Format(http.TimeFormat), "Age", "10"), 0, 50 * time.Second},
		{"Date in the future counts 0", hdr("Date", req.Add(time.Hour).Format(http.TimeFormat)), 0, 0},
		{"junk Age", hdr("Age", "abc"), 0, 0},
		{"first of several", hdr("Age", "5, 9"), 0, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := InitialAge(tt.h, req, req.Add(tt.delay)); got != tt.wantAge {
				t.Errorf("got %v, want %v", got, tt.wantAge)
			}
		})
	}
}

func TestAcceptable(t *testing.T) {
	sec := time.Second
	tests := []struct {
		req         string
		age, life   time.Duration
		noStale, ok bool
	}{
		{"", 5 * sec, 10 * sec, false, true},
		{"", 10 * sec, 10 * sec, false, false},
		{"max-age=4", 5 * sec, 10 * sec, false, false},
		{"max-age=5", 5 * sec, 10 * sec, false, true},
		{"min-fresh=6", 5 * sec, 10 * sec, false, false},
		{"min-fresh=5", 5 * sec, 10 * sec, false, true},
		{"max-stale=5", 15 * sec, 10 * sec, false, true},
		{"max-stale=4", 15 * sec, 10 * sec, false, false},
		{"max-stale", 1000 * sec, 10 * sec, false, true},
		{"max-stale", 11 * sec, 10 * sec, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.req, func(t *testing.T) {
			if got := Acceptable(ParseValue(tt.req), tt.age, tt.life, tt.noStale); got != tt.ok {
				t.Errorf("age %v life %v: got %v", tt.age, tt.life, got)
			}
		})
	}
}

// FuzzParse: no input panics, and a directive the parser reports set
// comes from the input.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"max-age=60", `no-cache="a,b"`, `x="\`, "max-stale", ",,=,=", "s-maxage=1, must-revalidate"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d := ParseValue(s)
		if d.MaxAge.Set && !strings.Contains(strings.ToLower(s), "max-age") {
			t.Fatalf("max-age from nowhere in %q", s)
		}
		if d.MaxAge.D < 0 || d.MaxAge.D > MaxDelta {
			t.Fatalf("max-age out of range: %v", d.MaxAge.D)
		}
		_ = Evaluate(http.Header{"Cache-Control": {s}, "Expires": {s}, "Date": {s}, "Last-Modified": {s}}, time.Now(), Options{})
	})
}

// TestTargetedNoStoreAllocs: the check runs on every answer and every
// bulk element; it must not copy a field name to look the field up.
func TestTargetedNoStoreAllocs(t *testing.T) {
	h := http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"max-age=60"}}
	if n := testing.AllocsPerRun(100, func() { _ = TargetedNoStore(h) }); n != 0 {
		t.Errorf("TargetedNoStore: %.1f allocations per call, want 0", n)
	}
}
