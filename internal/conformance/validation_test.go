package conformance

import (
	"testing"
	"time"
)

// RFC 9111 §4.3: validation — conditional requests to the origin for a
// stale entry, 304 handling (§4.3.4), and client conditionals answered
// from a fresh entry (§4.3.2).
func TestValidation(t *testing.T) {
	etag := func(v, cc string) Resp { return Resp{Header: []string{"ETag", v, "Cache-Control", cc}} }
	notModified := func(h ...string) Resp { return Resp{Status: 304, Header: h} }
	runTable(t, []Case{
		{Name: "ETag: If-None-Match, and a 304 refreshes without the body", Route: originMode,
			Origin: []Resp{etag(`"v1"`, "max-age=10"), notModified("ETag", `"v1"`, "Cache-Control", "max-age=10")},
			Steps: []Step{
				{Fetch: true, Body: "body-1"},
				{After: 11 * time.Second, Fetch: true, Cond: `If-None-Match: "v1"`, Body: "body-1", Age: "0", CacheStatus: "fwd=stale; fwd-status=304; ttl=10; stored"},
				{After: 9 * time.Second, Body: "body-1", Age: "9", CacheStatus: "hit"},
				{After: 2 * time.Second, Fetch: true, Cond: `If-None-Match: "v1"`, Body: "body-1"},
			}},
		{Name: "Last-Modified: If-Modified-Since", Route: originMode,
			Origin: []Resp{{Header: []string{"Last-Modified", "{epoch-3600}", "Cache-Control", "max-age=10"}}, notModified()},
			Steps: []Step{
				{Fetch: true},
				{After: 11 * time.Second, Fetch: true, Cond: "If-Modified-Since: {epoch-3600}", Body: "body-1"},
			}},
		{Name: "both validators sent", Route: originMode,
			Origin: []Resp{{Header: []string{"ETag", `"a"`, "Last-Modified", "{epoch-60}", "Cache-Control", "max-age=1"}}, notModified()},
			Steps: []Step{
				{Fetch: true},
				{After: 2 * time.Second, Fetch: true, Cond: `If-None-Match: "a", If-Modified-Since: {epoch-60}`, Body: "body-1"},
			}},
		{Name: "304 updates the stored header and freshness (§4.3.4)", Route: originMode,
			Origin: []Resp{
				{Header: []string{"ETag", `"v1"`, "Cache-Control", "max-age=10", "X-Version", "1", "Content-Type", "text/x-one"}},
				notModified("ETag", `"v1"`, "Cache-Control", "max-age=100", "X-Version", "2"),
			},
			Steps: []Step{
				{Fetch: true, Headers: []string{"X-Version", "1"}},
				{After: 11 * time.Second, Fetch: true, Cond: `If-None-Match: "v1"`, Body: "body-1", Headers: []string{"X-Version", "2", "Content-Type", "text/x-one"}},
				{After: 50 * time.Second, Body: "body-1", Headers: []string{"X-Version", "2", "Cache-Control", "max-age=100"}},
			}},
		{Name: "a 304 with another strong ETag: fetched again whole (§4.3.4)", Route: originMode,
			Origin: []Resp{etag(`"v1"`, "max-age=10"), notModified("ETag", `"v2"`), {Header: []string{"ETag", `"v2"`}, Body: "v2"}},
			Steps: []Step{
				{Fetch: true},
				{After: 11 * time.Second, Fetch: true, Cond: "", Body: "v2"},
			}},
		{Name: "a 200 to the conditional replaces the entry", Route: originMode,
			Origin: []Resp{etag(`"v1"`, "max-age=10"), {Header: []string{"ETag", `"v2"`, "Cache-Control", "max-age=10"}, Body: "new"}},
			Steps: []Step{
				{Fetch: true},
				{After: 11 * time.Second, Fetch: true, Cond: `If-None-Match: "v1"`, Body: "new"},
				{After: time.Second, Body: "new"},
			}},
		{Name: "Age of a 304 is the 304's", Route: originMode,
			Origin: []Resp{etag(`"v1"`, "max-age=10"), notModified("Age", "4")},
			Steps: []Step{
				{Fetch: true},
				{After: 11 * time.Second, Fetch: true, Cond: `If-None-Match: "v1"`, Age: "4"},
				{After: 5 * time.Second, Age: "9"},
			}},
		{Name: "kept past staleness to be revalidated", Route: originMode,
			Origin: []Resp{etag(`"v1"`, "max-age=10"), notModified()},
			Steps: []Step{
				{Fetch: true},
				{After: 9 * time.Minute, Fetch: true, Cond: `If-None-Match: "v1"`, Body: "body-1"},
			}},
		{Name: "weak ETag: sent as it is, a 304 with it refreshes", Route: originMode,
			Origin: []Resp{etag(`W/"v1"`, "max-age=10"), notModified("ETag", `W/"v1"`, "Cache-Control", "max-age=10")},
			Steps: []Step{
				{Fetch: true},
				{After: 11 * time.Second, Fetch: true, Cond: `If-None-Match: W/"v1"`, Body: "body-1"},
				{After: 5 * time.Second, Body: "body-1", CacheStatus: "hit"},
			}},
		{Name: "no-cache: max-stale from the client does not lift it (§5.2.2.4)", Route: originMode,
			Origin: []Resp{etag(`"v1"`, "no-cache"), notModified()},
			Steps:  []Step{{Fetch: true}, {Header: []string{"Cache-Control", "max-stale"}, Fetch: true, Cond: `If-None-Match: "v1"`, Body: "body-1"}}},
		{Name: "no validator: fetched whole", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=10"}}},
			Steps:  []Step{{Fetch: true}, {After: 11 * time.Second, Fetch: true, Cond: "", Body: "body-2"}},
		},
		{Name: "no-cache with a validator: stored, revalidated on every use (§5.2.2.4)", Route: originMode,
			Origin: []Resp{etag(`"v1"`, "no-cache"), notModified()},
			Steps: []Step{
				{Fetch: true},
				{Fetch: true, Cond: `If-None-Match: "v1"`, Body: "body-1"},
				{Fetch: true, Cond: `If-None-Match: "v1"`, Body: "body-1"},
			}},
		{Name: "max-age=0, must-revalidate with a validator: revalidated", Route: originMode,
			Origin: []Resp{etag(`"v1"`, "max-age=0, must-revalidate"), notModified()},
			Steps:  []Step{{Fetch: true}, {Fetch: true, Cond: `If-None-Match: "v1"`, Body: "body-1"}},
		},
		{Name: "route mode revalidates too", Route: "ttl: 10s",
			Origin: []Resp{etag(`"v1"`, "max-age=3600"), notModified()},
			Steps: []Step{
				{Fetch: true},
				{After: 11 * time.Second, Fetch: true, Cond: `If-None-Match: "v1"`, Body: "body-1"},
				{After: 9 * time.Second, CacheStatus: "hit"},
			}},
		{Name: "stale-while-revalidate refresh is conditional", Route: originMode,
			Origin: []Resp{etag(`"v1"`, "max-age=10, stale-while-revalidate=60"), notModified("Cache-Control", "max-age=100")},
			Steps: []Step{
				{Fetch: true},
				{After: 11 * time.Second, Background: true, Fetch: true, Cond: `If-None-Match: "v1"`, Body: "body-1", CacheStatus: "fwd=stale"},
			}},
		{Name: "client If-None-Match: 304 from a fresh entry", Route: originMode,
			Origin: []Resp{etag(`"v1"`, "max-age=60")},
			Steps:  []Step{{Fetch: true}, {Header: []string{"If-None-Match", `"v1"`}, Status: 304}},
		},
		{Name: "client If-Modified-Since against Last-Modified", Route: originMode,
			Origin: []Resp{{Header: []string{"Last-Modified", "{epoch-60}", "Cache-Control", "max-age=60"}}},
			Steps: []Step{
				{Fetch: true},
				{Header: []string{"If-Modified-Since", "{epoch-60}"}, Status: 304},
				{Header: []string{"If-Modified-Since", "{epoch-61}"}, Status: 200},
			}},
		// Date names a second, not a version: a copy and an answer made
		// after a write in the same second share it, so Date stands in
		// only when it is strictly earlier than the client's date.
		{Name: "client If-Modified-Since falls back to Date (§4.3.2)", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=60"}}},
			Steps: []Step{
				{Fetch: true},
				{Header: []string{"If-Modified-Since", "{epoch+1}"}, Status: 304},
				{Header: []string{"If-Modified-Since", "{epoch}"}, Status: 200},
				{Header: []string{"If-Modified-Since", "{epoch-1}"}, Status: 200},
			}},
	})
}

// RFC 9111 §4.3.2 with RFC 9110 §13.1: the client's conditionals a cache
// evaluates itself (If-None-Match with the weak comparison, If-None-Match:
// *, If-Modified-Since only without If-None-Match), the ones it leaves to
// the origin (If-Match, If-Unmodified-Since), and revalidation of the
// variant the request selects (§4.1 with §4.3.1).
func TestClientConditionals(t *testing.T) {
	stored := func(h ...string) []Resp {
		return []Resp{{Header: append([]string{"Cache-Control", "max-age=60"}, h...)}, {Status: 412}}
	}
	etagged := stored("ETag", `"v1"`, "Last-Modified", "{epoch-60}")
	runTable(t, []Case{
		{Name: "If-None-Match: weak client tag matches a strong stored one", Route: originMode, Origin: etagged,
			Steps: []Step{{Fetch: true}, {Header: []string{"If-None-Match", `W/"v1"`}, Status: 304, Headers: []string{"ETag", `"v1"`}}}},
		{Name: "If-None-Match: strong client tag matches a weak stored one", Route: originMode, Origin: stored("ETag", `W/"v1"`),
			Steps: []Step{{Fetch: true}, {Header: []string{"If-None-Match", `"v1"`}, Status: 304}}},
		{Name: "If-None-Match: a list, one matching", Route: originMode, Origin: etagged,
			Steps: []Step{{Fetch: true}, {Header: []string{"If-None-Match", `"a", "v1"`}, Status: 304}}},
		{Name: "If-None-Match: no match is 200 with the body", Route: originMode, Origin: etagged,
			Steps: []Step{{Fetch: true}, {Header: []string{"If-None-Match", `"v2"`}, Body: "body-1"}}},
		{Name: "If-None-Match: * matches a stored entry with an ETag", Route: originMode, Origin: etagged,
			Steps: []Step{{Fetch: true}, {Header: []string{"If-None-Match", "*"}, Status: 304}}},
		{Name: "If-None-Match: * matches a stored entry without one (RFC 9110 §13.1.2)", Route: originMode, Origin: stored(),
			Steps: []Step{{Fetch: true}, {Header: []string{"If-None-Match", "*"}, Status: 304}}},
		{Name: "If-Modified-Since ignored when If-None-Match is present (RFC 9110 §13.1.3)", Route: originMode, Origin: etagged,
			Steps: []Step{{Fetch: true}, {Header: []string{"If-None-Match", `"v2"`, "If-Modified-Since", "{epoch}"}, Body: "body-1"}}},
		{Name: "an invalid If-Modified-Since is ignored (RFC 9110 §13.1.3)", Route: originMode, Origin: etagged,
			Steps: []Step{{Fetch: true}, {Header: []string{"If-Modified-Since", "yesterday"}, Body: "body-1"}}},
		{Name: "If-None-Match without a stored ETag: 200", Route: originMode, Origin: stored("Last-Modified", "{epoch-60}"),
			Steps: []Step{{Fetch: true}, {Header: []string{"If-None-Match", `"v1"`, "If-Modified-Since", "{epoch}"}, Body: "body-1"}}},
		{Name: "If-Match is the origin's to evaluate (§4.3.2)", Route: originMode, Origin: etagged,
			Steps: []Step{{Fetch: true}, {Header: []string{"If-Match", `"other"`}, Fetch: true, Status: 412, Check: sawHeader("If-Match", `"other"`)}, {Body: "body-1", CacheStatus: "hit"}}},
		{Name: "If-Unmodified-Since is the origin's to evaluate (§4.3.2)", Route: originMode, Origin: etagged,
			Steps: []Step{{Fetch: true}, {Header: []string{"If-Unmodified-Since", "{epoch-3600}"}, Fetch: true, Status: 412, Check: sawHeader("If-Unmodified-Since", "{epoch-3600}")}}},
		{Name: "route mode: If-Match is the origin's too", Route: "ttl: 60s", Origin: etagged,
			Steps: []Step{{Fetch: true}, {Header: []string{"If-Match", `"other"`}, Fetch: true, Status: 412}}},
		{Name: "stale entry, client If-None-Match: revalidated, then 304 to the client", Route: originMode, Origin: []Resp{
			{Header: []string{"Cache-Control", "max-age=10", "ETag", `"v1"`}}, {Status: 304, Header: []string{"Cache-Control", "max-age=10"}}},
			Steps: []Step{{Fetch: true}, {After: 11 * time.Second, Header: []string{"If-None-Match", `"v1"`}, Fetch: true, Cond: `If-None-Match: "v1"`, Status: 304}}},
		{Name: "stale entry, client If-None-Match no longer matching: 200 with the new body", Route: originMode, Origin: []Resp{
			{Header: []string{"Cache-Control", "max-age=10", "ETag", `"v1"`}}, {Header: []string{"Cache-Control", "max-age=10", "ETag", `"v2"`}, Body: "new"}},
			Steps: []Step{{Fetch: true}, {After: 11 * time.Second, Header: []string{"If-None-Match", `"v1"`}, Fetch: true, Cond: `If-None-Match: "v1"`, Body: "new"}}},
		{Name: "Vary: the selected variant's validator is sent, its body kept", Route: originMode,
			// The first answer comes twice: the sidecar learns the Vary'd
			// header from it and asks again with it (README "Security model").
			Origin: []Resp{
				{Header: []string{"Cache-Control", "max-age=10", "Vary", "Accept-Language", "ETag", `"en1"`}, Body: "en"},
				{Header: []string{"Cache-Control", "max-age=10", "Vary", "Accept-Language", "ETag", `"en1"`}, Body: "en"},
				{Header: []string{"Cache-Control", "max-age=10", "Vary", "Accept-Language", "ETag", `"fr1"`}, Body: "fr"},
				{Status: 304, Header: []string{"Cache-Control", "max-age=10", "Vary", "Accept-Language"}},
			},
			Steps: []Step{
				{Header: []string{"Accept-Language", "en"}, Fetch: true, Body: "en"},
				{Header: []string{"Accept-Language", "fr"}, Fetch: true, Body: "fr"},
				{After: 11 * time.Second, Header: []string{"Accept-Language", "fr"}, Fetch: true, Cond: `If-None-Match: "fr1"`, Body: "fr"},
				{Header: []string{"Accept-Language", "en"}, Fetch: true, Cond: `If-None-Match: "en1"`, Body: "en"},
				{Header: []string{"Accept-Language", "fr"}, Body: "fr", CacheStatus: "hit"},
				{Header: []string{"Accept-Language", "en"}, Body: "en", CacheStatus: "hit"},
			}},
	})
}

// sawHeader checks a header of the origin's last request ({epoch±N}
// expanded).
func sawHeader(name, want string) func(*testing.T, Result) {
	return func(t *testing.T, r Result) {
		if got, want := r.Origin[len(r.Origin)-1].Header.Get(name), expand(want, epoch); got != want {
			t.Errorf("origin saw %s %q, want %q", name, got, want)
		}
	}
}
