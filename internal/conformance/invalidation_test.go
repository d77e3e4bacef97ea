package conformance

import (
	"slices"
	"testing"
	"time"
)

// post is a write the origin receives and answers with status.
func post(path string, status int) Step {
	return Step{Method: "POST", Path: path, Fetch: true, Status: status}
}

// RFC 9111 §4.4: invalidation by an unsafe method's non-error answer, of
// the target URI and of a same-origin Location / Content-Location;
// surrogate keys from the origin's Surrogate-Key header (the CDN practice
// Fastly and Varnish's xkey established), which a purge or a write route
// drops like a configured tag.
func TestInvalidation(t *testing.T) {
	cached := Resp{Header: []string{"Cache-Control", "max-age=60"}}
	writes := "- name: w\n  methods: [POST]\n  path: /w\n- name: p\n  methods: [POST]\n  path: /r/{id}"
	runTable(t, []Case{
		{Name: "a 2xx to POST invalidates the target URI", Route: originMode, Routes: writes,
			Origin: []Resp{cached, {Status: 204}, cached},
			Steps:  []Step{{Fetch: true}, {Body: "body-1"}, post("/r/1", 204), {Fetch: true, Body: "body-3"}}},
		{Name: "a 3xx to POST invalidates too (non-error)", Route: originMode, Routes: writes,
			Origin: []Resp{cached, {Status: 303, Header: []string{"Location", "/elsewhere"}}, cached},
			Steps:  []Step{{Fetch: true}, post("/r/1", 303), {Fetch: true, Body: "body-3"}}},
		{Name: "a 4xx to POST invalidates nothing", Route: originMode, Routes: writes,
			Origin: []Resp{cached, {Status: 400}, cached},
			Steps:  []Step{{Fetch: true}, {Method: "POST", Path: "/r/1", Fetch: true, Status: 400}, {Body: "body-1", CacheStatus: "hit"}}},
		{Name: "Location of a 201 names a URI to invalidate", Route: originMode, Routes: writes,
			Origin: []Resp{cached, {Status: 201, Header: []string{"Location", "/r/1"}}, cached},
			Steps:  []Step{{Fetch: true}, {Method: "POST", Path: "/w", Fetch: true, Status: 201}, {Fetch: true, Body: "body-3"}}},
		{Name: "Content-Location names a URI to invalidate", Route: originMode, Routes: writes,
			Origin: []Resp{cached, {Header: []string{"Content-Location", "/r/1"}}, cached},
			Steps:  []Step{{Fetch: true}, post("/w", 200), {Fetch: true, Body: "body-3"}}},
		{Name: "a cross-origin Location is ignored", Route: originMode, Routes: writes,
			Origin: []Resp{cached, {Status: 201, Header: []string{"Location", "http://elsewhere.example/r/1"}}, cached},
			Steps:  []Step{{Fetch: true}, {Method: "POST", Path: "/w", Fetch: true, Status: 201}, {Body: "body-1", CacheStatus: "hit"}}},
		{Name: "every query of the invalidated path goes", Route: originMode, Routes: writes,
			Origin: []Resp{cached, cached, {Status: 204}, cached},
			Steps: []Step{{Path: "/r/1?a=1", Fetch: true}, {Path: "/r/1?a=2", Fetch: true}, post("/r/1", 204),
				{Path: "/r/1?a=2", Fetch: true, Body: "body-4"}}},
	})
}

// Surrogate keys from the origin (not an RFC 9111 section; the CDN
// convention): stored as tags, stripped before the client, and kept
// across a 304 that does not repeat them (§4.3.4 lets a 304 omit
// unchanged fields).
func TestSurrogateKeys(t *testing.T) {
	writes := "- name: w\n  methods: [POST]\n  path: /w\n  invalidate: [\"k1\"]"
	tagged := Resp{Header: []string{"Cache-Control", "max-age=60", "Surrogate-Key", "k1 k2"}}
	runTable(t, []Case{
		{Name: "a key of the origin is dropped by a write invalidating it", Route: originMode, Routes: writes,
			Origin: []Resp{tagged, {Status: 204}, tagged},
			Steps: []Step{{Fetch: true, Headers: []string{"Surrogate-Key", ""}}, {CacheStatus: "hit", Headers: []string{"Surrogate-Key", ""}},
				post("/w", 204), {Fetch: true, Body: "body-3"}}},
		{Name: "route mode too", Route: "ttl: 60s", Routes: writes,
			Origin: []Resp{tagged, {Status: 204}, tagged},
			Steps:  []Step{{Fetch: true}, post("/w", 204), {Fetch: true, Body: "body-3"}}},
		{Name: "keys survive a 304 that omits them", Route: originMode, Routes: writes,
			Origin: []Resp{
				{Header: []string{"Cache-Control", "max-age=10", "ETag", `"v1"`, "Surrogate-Key", "k1"}},
				{Status: 304, Header: []string{"Cache-Control", "max-age=10"}},
				{Status: 204},
				{Header: []string{"Cache-Control", "max-age=10"}, Body: "v2"},
			},
			Steps: []Step{{Fetch: true}, {After: 11 * time.Second, Fetch: true, Cond: `If-None-Match: "v1"`, Body: "body-1"},
				{CacheStatus: "hit", Headers: []string{"Surrogate-Key", ""}}, post("/w", 204), {Fetch: true, Body: "v2"}}},
	})
}

// RFC 9110 §15.2 (interim responses) as a cache must treat them: a 103
// reaches the client whose request fetched, and is never stored.
func TestInterim(t *testing.T) {
	runTable(t, []Case{
		{Name: "103 relayed on a miss, not replayed on a hit", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=60"}, Hints: []string{"Link", "</s.css>; rel=preload"}}},
			Steps: []Step{
				{Fetch: true, Check: func(t *testing.T, r Result) {
					if !slices.Equal(r.Interim, []int{103}) {
						t.Errorf("interim %v, want [103]", r.Interim)
					}
				}},
				{CacheStatus: "hit", Check: func(t *testing.T, r Result) {
					if len(r.Interim) != 0 {
						t.Errorf("interim on a hit: %v", r.Interim)
					}
				}},
			}},
	})
}
