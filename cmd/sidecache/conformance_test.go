package main

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/conformance/script"
)

// TestConformanceBinary plays clock-free rows of the RFC 9111 conformance
// table (internal/conformance, whose rows run the server wiring in-process
// on a test clock) against the built binary, so that what the table
// asserts is literally what the shipped sidecar does. Rows that move the
// clock stay in-process: the binary reads the wall clock.
func TestConformanceBinary(t *testing.T) {
	const origin = "freshness: origin"
	etag := func(cc string) script.Resp {
		return script.Resp{Header: []string{"Cache-Control", cc, "ETag", `"v1"`}}
	}
	cases := []script.Case{
		{Name: "max-age: stored and reused (§3, §4.2)", Route: origin,
			Origin: []script.Resp{etag("max-age=60")},
			Steps: []script.Step{
				{Fetch: true, Body: "body-1", CacheStatus: "stored"},
				{Body: "body-1", CacheStatus: "hit"},
			}},
		{Name: "no-store: not stored (§5.2.2.5)", Route: origin,
			Origin: []script.Resp{{Header: []string{"Cache-Control", "no-store, max-age=60"}}},
			Steps:  []script.Step{{Fetch: true}, {Fetch: true, Body: "body-2"}}},
		{Name: "no-cache with a validator: revalidated on every use (§5.2.2.4)", Route: origin,
			Origin: []script.Resp{etag("no-cache"), {Status: 304}},
			Steps: []script.Step{
				{Fetch: true},
				{Fetch: true, Cond: `If-None-Match: "v1"`, Body: "body-1", CacheStatus: "fwd-status=304"},
			}},
		{Name: "must-revalidate, origin unreachable: 504 (§5.2.2.2)", Route: origin,
			Origin: []script.Resp{etag("max-age=0, must-revalidate"), {Drop: true}},
			Steps:  []script.Step{{Fetch: true}, {Fetch: true, Cond: `If-None-Match: "v1"`, Status: 504}}},
		{Name: "client If-None-Match: 304 from the stored entry (§4.3.2)", Route: origin,
			Origin: []script.Resp{etag("max-age=60")},
			Steps:  []script.Step{{Fetch: true}, {Header: []string{"If-None-Match", `W/"v1"`}, Status: 304}}},
		{Name: "If-Match goes to the origin (§4.3.2)", Route: origin,
			Origin: []script.Resp{etag("max-age=60"), {Status: 412}},
			Steps:  []script.Step{{Fetch: true}, {Header: []string{"If-Match", `"other"`}, Fetch: true, Status: 412}}},
		{Name: "only-if-cached, nothing stored: 504 (§5.2.1.7)", Route: origin,
			Origin: []script.Resp{etag("max-age=60")},
			Steps:  []script.Step{{Header: []string{"Cache-Control", "only-if-cached"}, Status: 504}}},
		{Name: "HEAD from the stored GET (RFC 9110 §9.3.2)", Route: origin,
			Origin: []script.Resp{etag("max-age=60")},
			Steps:  []script.Step{{Fetch: true}, {Method: http.MethodHead, CacheStatus: "hit", Headers: []string{"ETag", `"v1"`}}}},
		{Name: "Authorization with public: not stored (§3.5, docs)", Route: origin,
			Origin: []script.Resp{{Header: []string{"Cache-Control", "public, max-age=60"}}},
			Steps: []script.Step{
				{Header: []string{"Authorization", "Bearer a"}, Fetch: true},
				{Header: []string{"Authorization", "Bearer a"}, Fetch: true},
				{Fetch: true, Body: "body-3"},
			}},
		{Name: "route mode: the route's ttl, not max-age=0", Route: "ttl: 60s",
			Origin: []script.Resp{{Header: []string{"Cache-Control", "max-age=0"}}},
			Steps:  []script.Step{{Fetch: true}, {Body: "body-1", CacheStatus: "hit"}}},
	}
	for _, c := range cases {
		if !script.ClockFree(c) {
			t.Fatalf("%s moves the clock: the binary reads its own", c.Name)
		}
	}
	start := func(t *testing.T, cfg string, _ func() time.Time) string {
		return startSidecache(t, writeFile(t, filepath.Join(t.TempDir(), "sidecache.yaml"), cfg)).proxy
	}
	script.RunTable(t, cases, start, true)
}
