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
		{Name: "client If-Modified-Since falls back to Date (§4.3.2)", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=60"}}},
			Steps: []Step{
				{Fetch: true},
				{Header: []string{"If-Modified-Since", "{epoch}"}, Status: 304},
				{Header: []string{"If-Modified-Since", "{epoch-1}"}, Status: 200},
			}},
	})
}
