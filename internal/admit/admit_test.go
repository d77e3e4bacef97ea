package admit_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/admit"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/route"
)

// tombs marks every entry stale when on.
type tombs bool

func (t tombs) Stale(*cache.Entry, time.Time) bool { return bool(t) }

func compile(t *testing.T, s route.Spec) *route.Route {
	t.Helper()
	s.Name, s.Pattern, s.Key = "r", "/r/{id}", cachekey.Options{AllQuery: true}
	tab, err := route.Compile([]route.Spec{s})
	if err != nil {
		t.Fatal(err)
	}
	return tab.Route("r")
}

// TestDecide: whether an answer is shared and stored, and its lifetimes,
// in both freshness modes.
func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const min = time.Minute
	byRoute := route.Spec{TTL: min, StaleWhileRevalidate: 10 * time.Second, NegativeTTL: 5 * time.Second}
	byOrigin := route.Spec{TTL: min, Origin: &route.Origin{}}
	cases := []struct {
		name        string
		spec        route.Spec
		status      int
		hdr         http.Header
		body        string
		sentWithout bool
		stale       tombs
		share, keep bool
		ttl, swr    time.Duration
	}{
		{"route ttl", byRoute, 200, nil, "x", false, false, true, true, min, 10 * time.Second},
		{"route ttl from the age it came with", byRoute, 200, http.Header{"Age": {"20"}}, "x", false, false, true, true, 20*time.Second + min, 10 * time.Second},
		{"negative", byRoute, 404, nil, "x", false, false, true, true, 5 * time.Second, 0},
		{"private", byRoute, 200, http.Header{"Cache-Control": {"private"}}, "x", false, false, false, false, 0, 0},
		{"Vary: *", byRoute, 200, http.Header{"Vary": {"*"}}, "x", false, false, false, false, 0, 0},
		{"varies on the sidecar's own header", byRoute, 200, http.Header{"Vary": {"X-Forwarded-For"}}, "x", false, false, false, false, 0, 0},
		{"varies on a header not sent", byRoute, 200, http.Header{"Vary": {"Accept-Language"}}, "x", true, false, false, false, 0, 0},
		{"no-cache on a route-mode route", byRoute, 200, http.Header{"Cache-Control": {"no-cache"}}, "x", false, false, true, false, 0, 0},
		{"over max body", byRoute, 200, nil, strings.Repeat("x", 200), false, false, true, false, min, 10 * time.Second},
		{"invalidated while fetched", byRoute, 200, nil, "x", false, true, true, false, min, 10 * time.Second},
		{"origin max-age", byOrigin, 200, http.Header{"Cache-Control": {"max-age=30"}}, "x", false, false, true, true, 30 * time.Second, 0},
		{"origin no-store", byOrigin, 200, http.Header{"Cache-Control": {"no-store"}}, "x", false, false, false, false, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.hdr.Clone()
			if h == nil {
				h = http.Header{}
			}
			h.Set("Date", now.Format(http.TimeFormat))
			e := &cache.Entry{Status: tc.status, Header: h, Body: []byte(tc.body), StoredAt: now}
			hd := admit.Hear(h, now, now)
			o := admit.Options{Route: compile(t, tc.spec), MaxBody: 100, Tombs: tc.stale}
			a := admit.Decide(&o, e, h, &hd, tc.sentWithout, now)
			if a.Shareable != tc.share || a.Store != tc.keep {
				t.Fatalf("shareable %v store %v, want %v %v", a.Shareable, a.Store, tc.share, tc.keep)
			}
			if a.Store && (a.TTL != tc.ttl || a.SWR != tc.swr) {
				t.Errorf("ttl %v swr %v, want %v %v", a.TTL, a.SWR, tc.ttl, tc.swr)
			}
		})
	}
}

// TestApply: the entry gets the lifetimes, and the stripped fields leave
// a copy of its header, not the one it shares.
func TestApply(t *testing.T) {
	h := http.Header{"Set-Cookie": {"a=1"}, "Etag": {`"x"`}}
	e := &cache.Entry{Header: h}
	admit.Admission{TTL: time.Minute, Age: time.Second, Keep: time.Hour, NoStale: true, Strip: []string{"Set-Cookie"}}.Apply(e)
	if e.TTL != time.Minute || e.InitialAge != time.Second || e.Keep != time.Hour || !e.NoStale {
		t.Errorf("lifetimes not applied: %+v", e)
	}
	if _, ok := e.Header["Set-Cookie"]; ok || e.Header.Get("Etag") == "" {
		t.Errorf("header %v, want Set-Cookie stripped alone", e.Header)
	}
	if _, ok := h["Set-Cookie"]; !ok {
		t.Error("the shared header was changed in place")
	}
}

// The header block counts against max_body_bytes whether Decide measures
// it or the caller did (Heard.HeaderSized, a bulk answer's shared header):
// an answer at the bound is kept, one byte over is not, with the ETag held
// outside the header counted either way.
func TestDecideMeasuredHeader(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rt := compile(t, route.Spec{TTL: time.Minute})
	h := http.Header{"Content-Type": {"application/json"}, "Date": {now.Format(http.TimeFormat)}}
	etag := `"abc"`
	hb := httpcache.HeaderBytes(h) + int64(len("Etag")+len(etag)+4)
	for _, sized := range []bool{false, true} {
		for _, over := range []int64{0, 1} {
			e := &cache.Entry{Status: 200, Header: h, Body: []byte("x"), StoredAt: now}
			e.SetETag([]string{etag})
			hd := admit.Hear(h, now, now)
			if sized {
				hd.HeaderSized, hd.HeaderBytes = true, httpcache.HeaderBytes(h)
			}
			o := admit.Options{Route: rt, MaxBody: 1 + hb - over, Tombs: tombs(false)}
			if a := admit.Decide(&o, e, h, &hd, false, now); a.Store != (over == 0) {
				t.Errorf("measured by caller %v, %d over: store %v", sized, over, a.Store)
			}
		}
	}
}

// BenchmarkDecideElement is Decide for one stored element of a bulk
// answer, its header (four fields) shared with the others: measured by
// Decide (walk) or once by the caller for them all (sized).
//
//	go test -run - -bench DecideElement -benchmem ./internal/admit
func BenchmarkDecideElement(b *testing.B) {
	now := time.Now()
	rt, err := route.Compile([]route.Spec{{Name: "r", Pattern: "/r/{id}", TTL: time.Minute}})
	if err != nil {
		b.Fatal(err)
	}
	h := http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"max-age=300"},
		"Date": {now.UTC().Format(http.TimeFormat)}, "Vary": {"Accept-Encoding"}}
	e := &cache.Entry{Status: 200, Header: h, Body: []byte(strings.Repeat("x", 800)), StoredAt: now, Tags: []string{"_route:r"}}
	e.SetETag([]string{`"0123456789abcdef0123456789abcdef0123456789a"`})
	o := admit.Options{Route: rt.Route("r"), MaxBody: 1 << 20, Tombs: tombs(false)}
	for _, sized := range []bool{false, true} {
		name := map[bool]string{false: "walk", true: "sized"}[sized]
		b.Run(name, func(b *testing.B) {
			hd := admit.Hear(h, now, now)
			hd.HeaderSized, hd.HeaderBytes = sized, httpcache.HeaderBytes(h)
			b.ReportAllocs()
			for b.Loop() {
				if !admit.Decide(&o, e, h, &hd, false, now).Store {
					b.Fatal("not stored")
				}
			}
		})
	}
}

// TestStripWhenNotStored: the fields a qualified private or no-cache names
// are withheld from every answer that is shared, stored or not (prober
// H7: an answer not stored went to the collapsed requests whole), in both
// freshness modes.
func TestStripWhenNotStored(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		spec route.Spec
		cc   string
		body string
	}{
		{route.Spec{TTL: time.Minute, Origin: &route.Origin{}}, `max-age=0, private="X-Secret"`, "x"},
		{route.Spec{TTL: time.Minute, Origin: &route.Origin{}}, `max-age=0, must-revalidate, no-cache="X-Secret"`, "x"},
		{route.Spec{TTL: time.Minute, Origin: &route.Origin{}}, `max-age=60, private="X-Secret"`, strings.Repeat("x", 200)}, // over max body
		{route.Spec{TTL: time.Minute}, `no-cache="X-Secret"`, "x"},
	}
	for _, tc := range cases {
		h := http.Header{"Cache-Control": {tc.cc}, "X-Secret": {"mine"}, "Date": {now.Format(http.TimeFormat)}}
		e := &cache.Entry{Status: 200, Header: h, Body: []byte(tc.body), StoredAt: now}
		hd := admit.Hear(h, now, now)
		o := admit.Options{Route: compile(t, tc.spec), MaxBody: 100, Tombs: tombs(false)}
		a := admit.Decide(&o, e, h, &hd, false, now)
		if !a.Shareable || a.Store {
			t.Fatalf("%s: shareable %v store %v, want shared, not stored", tc.cc, a.Shareable, a.Store)
		}
		if !slices.Contains(a.Strip, "X-Secret") {
			t.Errorf("%s: Strip %q, want X-Secret", tc.cc, a.Strip)
		}
		a.Withhold(e)
		if _, ok := e.Header["X-Secret"]; ok {
			t.Errorf("%s: X-Secret kept for the collapsed requests", tc.cc)
		}
		if h.Get("X-Secret") != "mine" {
			t.Errorf("%s: the answer's own header was changed in place", tc.cc)
		}
	}
}
