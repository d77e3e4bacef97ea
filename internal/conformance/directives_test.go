package conformance

import (
	"testing"
	"time"
)

// RFC 9111 §5.2: request directives (§5.2.1) on an origin-mode route, and
// the response directives not covered by the other sections (§5.2.2).
func TestRequestDirectives(t *testing.T) {
	fresh60 := []Resp{{Header: []string{"Cache-Control", "max-age=60"}}}
	runTable(t, []Case{
		{Name: "max-age=0: not served from the cache", Route: originMode, Origin: fresh60,
			Steps: []Step{{Fetch: true}, {After: time.Second, Header: []string{"Cache-Control", "max-age=0"}, Fetch: true, Body: "body-2"}}},
		{Name: "max-age=0 with a validator: revalidated", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=60", "ETag", `"v1"`}}, {Status: 304}},
			Steps: []Step{
				{Fetch: true},
				{After: time.Second, Header: []string{"Cache-Control", "max-age=0"}, Fetch: true, Cond: `If-None-Match: "v1"`, Body: "body-1"},
			}},
		{Name: "max-age: an entry no older is reused", Route: originMode, Origin: fresh60,
			Steps: []Step{{Fetch: true}, {After: 10 * time.Second, Header: []string{"Cache-Control", "max-age=10"}}, {After: time.Second, Header: []string{"Cache-Control", "max-age=10"}, Fetch: true}}},
		{Name: "min-fresh", Route: originMode, Origin: fresh60,
			Steps: []Step{{Fetch: true}, {After: 20 * time.Second, Header: []string{"Cache-Control", "min-fresh=40"}}, {After: time.Second, Header: []string{"Cache-Control", "min-fresh=40"}, Fetch: true}}},
		{Name: "max-stale: a stale entry within it is reused", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=10", "ETag", `"v1"`}}},
			Steps: []Step{
				{Fetch: true},
				{After: 15 * time.Second, Header: []string{"Cache-Control", "max-stale=10"}, Age: "15"},
				{After: 10 * time.Second, Header: []string{"Cache-Control", "max-stale=10"}, Fetch: true, Cond: `If-None-Match: "v1"`},
			}},
		{Name: "max-stale without a value: any age", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=10", "ETag", `"v1"`}}},
			Steps:  []Step{{Fetch: true}, {After: 5 * time.Minute, Header: []string{"Cache-Control", "max-stale"}}}},
		{Name: "max-stale does not lift must-revalidate (§5.2.2.2)", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=10, must-revalidate", "ETag", `"v1"`}}, {Status: 304}},
			Steps:  []Step{{Fetch: true}, {After: 15 * time.Second, Header: []string{"Cache-Control", "max-stale=60"}, Fetch: true, Cond: `If-None-Match: "v1"`}}},
		{Name: "only-if-cached: a stored entry", Route: originMode, Origin: fresh60,
			Steps: []Step{{Fetch: true}, {Header: []string{"Cache-Control", "only-if-cached"}, Body: "body-1"}}},
		{Name: "only-if-cached: nothing stored is 504", Route: originMode, Origin: fresh60,
			Steps: []Step{{Header: []string{"Cache-Control", "only-if-cached"}, Status: 504, CacheStatus: "sidecache; detail=only-if-cached"}, {Fetch: true}}},
		{Name: "only-if-cached: a stale entry is 504", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=10", "ETag", `"v1"`}}},
			Steps:  []Step{{Fetch: true}, {After: 11 * time.Second, Header: []string{"Cache-Control", "only-if-cached"}, Status: 504}}},
		{Name: "no-cache: fetched again whole and stored (the SPEC's refresh)", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=60", "ETag", `"v1"`}}},
			Steps: []Step{
				{Fetch: true},
				{Header: []string{"Cache-Control", "no-cache"}, Fetch: true, Cond: "", Body: "body-2", CacheStatus: "fwd=request"},
				{Body: "body-2"},
			}},
		{Name: "Pragma: no-cache is no-cache (§5.4)", Route: originMode, Origin: fresh60,
			Steps: []Step{{Fetch: true}, {Header: []string{"Pragma", "no-cache"}, Fetch: true}}},
		{Name: "no-store: not served from nor stored in the cache", Route: originMode, Origin: fresh60,
			Steps: []Step{{Fetch: true}, {Header: []string{"Cache-Control", "no-store"}, Fetch: true}, {Body: "body-1"}}},
		{Name: "no-transform: the stored body and its coding relayed as they came (§5.2.2.6)", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=60, no-transform", "Content-Encoding", "gzip", "Content-Type", "image/x-raw"}, Body: "\x1f\x8b-not-really"}},
			Steps: []Step{
				{Header: []string{"Accept-Encoding", "gzip"}, Fetch: true, Body: "\x1f\x8b-not-really"},
				{Header: []string{"Accept-Encoding", "gzip"}, Body: "\x1f\x8b-not-really", CacheStatus: "hit",
					Headers: []string{"Content-Encoding", "gzip", "Content-Type", "image/x-raw", "Content-Length", "13", "Cache-Control", "max-age=60, no-transform"}},
			}},
		{Name: "route mode: max-age=0 from the client is ignored", Route: "ttl: 60s", Origin: fresh60,
			Steps: []Step{{Fetch: true}, {After: time.Second, Header: []string{"Cache-Control", "max-age=0"}}}},
		{Name: "route mode: only-if-cached is ignored", Route: "ttl: 60s", Origin: fresh60,
			Steps: []Step{{Header: []string{"Cache-Control", "only-if-cached"}, Fetch: true}}},
	})
}

// RFC 9111 §4.2.4: serving stale responses — only where the origin (RFC
// 5861) or the route's configuration allows it.
func TestServingStale(t *testing.T) {
	runTable(t, []Case{
		{Name: "stale-while-revalidate: stale served, one background refresh", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=10, stale-while-revalidate=30"}}},
			Steps: []Step{
				{Fetch: true},
				{After: 15 * time.Second, Background: true, Fetch: true, Body: "body-1", CacheStatus: "fwd=stale"},
				{}, // served (stale or refreshed) without another upstream request
			}},
		{Name: "past stale-while-revalidate: fetched", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=10, stale-while-revalidate=30"}}},
			Steps:  []Step{{Fetch: true}, {After: 41 * time.Second, Fetch: true, Body: "body-2"}}},
		{Name: "stale-if-error: stale served on a 5xx", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=10, stale-if-error=60"}}, {Status: 500}},
			Steps:  []Step{{Fetch: true}, {After: 15 * time.Second, Fetch: true, Body: "body-1", CacheStatus: "fwd=stale"}}},
		{Name: "route's stale_if_error applies in origin mode", Route: originMode + "\nstale_if_error: 60s",
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=10"}}, {Status: 503}},
			Steps:  []Step{{Fetch: true}, {After: 15 * time.Second, Fetch: true, Body: "body-1"}}},
		{Name: "must-revalidate: no stale-if-error (§5.2.2.2)", Route: originMode + "\nstale_if_error: 60s",
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=10, must-revalidate, stale-if-error=60"}}, {Status: 503}},
			Steps:  []Step{{Fetch: true}, {After: 15 * time.Second, Fetch: true, Status: 503}}},
		{Name: "proxy-revalidate: no stale-while-revalidate (§5.2.2.8)", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=10, proxy-revalidate, stale-while-revalidate=60"}}},
			Steps:  []Step{{Fetch: true}, {After: 15 * time.Second, Fetch: true, Body: "body-2"}}},
		{Name: "s-maxage: no stale-while-revalidate (§5.2.2.10)", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "s-maxage=10, stale-while-revalidate=60"}}},
			Steps:  []Step{{Fetch: true}, {After: 15 * time.Second, Fetch: true, Body: "body-2"}}},
		{Name: "stale served carries its true Age and no Warning (RFC 9111 dropped Warning)", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=10, stale-while-revalidate=30"}}},
			Steps: []Step{
				{Fetch: true},
				{After: 15 * time.Second, Background: true, Fetch: true, Age: "15", Headers: []string{"Warning", ""}},
			}},
		{Name: "no stale window: a stale entry is not served on error", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=10"}}, {Status: 502}},
			Steps:  []Step{{Fetch: true}, {After: 15 * time.Second, Fetch: true, Status: 502}}},
	})
}

// RFC 9111 §5.2.2.2, §5.2.2.8, §5.2.2.10: a stale entry that may not be
// served stale, when the origin cannot be reached, answers 504 ("SHOULD
// be 504"), whether the connection was refused or timed out; without
// such a directive the SPEC's 502 for a broken connection stands.
func TestDisconnected(t *testing.T) {
	stored := func(cc string) []Resp {
		return []Resp{{Header: []string{"Cache-Control", cc, "ETag", `"v1"`}}, {Drop: true}}
	}
	runTable(t, []Case{
		{Name: "must-revalidate: 504 (§5.2.2.2)", Route: originMode, Origin: stored("max-age=10, must-revalidate"),
			Steps: []Step{{Fetch: true}, {After: 15 * time.Second, Fetch: true, Cond: `If-None-Match: "v1"`, Status: 504}}},
		{Name: "proxy-revalidate: 504 (§5.2.2.8)", Route: originMode, Origin: stored("max-age=10, proxy-revalidate"),
			Steps: []Step{{Fetch: true}, {After: 15 * time.Second, Fetch: true, Cond: `If-None-Match: "v1"`, Status: 504}}},
		{Name: "s-maxage: 504 (§5.2.2.10)", Route: originMode, Origin: stored("s-maxage=10"),
			Steps: []Step{{Fetch: true}, {After: 15 * time.Second, Fetch: true, Cond: `If-None-Match: "v1"`, Status: 504}}},
		{Name: "must-revalidate with stale-if-error: still 504", Route: originMode + "\nstale_if_error: 60s",
			Origin: stored("max-age=10, must-revalidate, stale-if-error=60"),
			Steps:  []Step{{Fetch: true}, {After: 15 * time.Second, Fetch: true, Cond: `If-None-Match: "v1"`, Status: 504}}},
		{Name: "must-revalidate, the origin times out: 504", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=10, must-revalidate", "ETag", `"v1"`}}, {Hang: true}},
			Steps:  []Step{{Fetch: true}, {After: 15 * time.Second, Fetch: true, Cond: `If-None-Match: "v1"`, Status: 504}}},
		{Name: "plain stale entry, no stale window: 502 (SPEC)", Route: originMode, Origin: stored("max-age=10"),
			Steps: []Step{{Fetch: true}, {After: 15 * time.Second, Fetch: true, Cond: `If-None-Match: "v1"`, Status: 502}}},
		{Name: "nothing stored: 502 (SPEC)", Route: originMode, Origin: []Resp{{Drop: true}},
			Steps: []Step{{Fetch: true, Status: 502}}},
		{Name: "stale-if-error: stale served when unreachable", Route: originMode,
			Origin: stored("max-age=10, stale-if-error=60"),
			Steps:  []Step{{Fetch: true}, {After: 15 * time.Second, Fetch: true, Cond: `If-None-Match: "v1"`, Body: "body-1", CacheStatus: "fwd=stale"}}},
		{Name: "must-revalidate, fresh: served without the origin", Route: originMode, Origin: stored("max-age=10, must-revalidate"),
			Steps: []Step{{Fetch: true}, {After: 5 * time.Second, Body: "body-1"}}},
	})
}
