package conformance

import (
	"testing"
	"time"
)

// originMode is the route setting most rows test.
const originMode = "freshness: origin"

// RFC 9111 §3: storing responses in a shared cache.
func TestStoring(t *testing.T) {
	runTable(t, []Case{
		{Name: "max-age: stored and reused", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=60"}}},
			Steps: []Step{
				{Fetch: true, Body: "body-1", CacheStatus: "stored"},
				{After: 30 * time.Second, Body: "body-1", Age: "30", CacheStatus: "hit"},
			}},
		{Name: "no-store: not stored (§5.2.2.5)", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "no-store, max-age=60"}}},
			Steps:  []Step{{Fetch: true}, {Fetch: true, Body: "body-2"}}},
		{Name: "private: not stored by a shared cache (§5.2.2.7)", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "private, max-age=60"}}},
			Steps:  []Step{{Fetch: true}, {Fetch: true}}},
		{Name: "Set-Cookie: not stored", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=60", "Set-Cookie", "a=b"}}},
			Steps:  []Step{{Fetch: true}, {Fetch: true}}},
		{Name: "no explicit freshness, no validator, no ttl: not stored", Route: originMode,
			Origin: []Resp{{}},
			Steps:  []Step{{Fetch: true}, {Fetch: true}}},
		{Name: "no-cache without validator: not stored (§5.2.2.4)", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "no-cache, max-age=60"}}},
			Steps:  []Step{{Fetch: true}, {Fetch: true, Cond: ""}}},
		{Name: "302 without explicit freshness: not stored", Route: originMode,
			Origin: []Resp{{Status: 302, Header: []string{"Location", "/elsewhere", "Last-Modified", "{now-3600}"}}},
			Steps:  []Step{{Fetch: true, Status: 302}, {Fetch: true, Status: 302}}},
		{Name: "302 with max-age: stored", Route: originMode,
			Origin: []Resp{{Status: 302, Header: []string{"Location", "/elsewhere", "Cache-Control", "max-age=60"}}},
			Steps:  []Step{{Fetch: true, Status: 302}, {Status: 302}}},
		{Name: "404 with max-age: stored", Route: originMode,
			Origin: []Resp{{Status: 404, Header: []string{"Cache-Control", "max-age=60"}}},
			Steps:  []Step{{Fetch: true, Status: 404}, {Status: 404}}},
		{Name: "404 without freshness: only under negative_ttl", Route: originMode + "\nttl: 60s",
			Origin: []Resp{{Status: 404}},
			Steps:  []Step{{Fetch: true, Status: 404}, {Fetch: true, Status: 404}}},
		{Name: "500 with max-age: never stored", Route: originMode,
			Origin: []Resp{{Status: 500, Header: []string{"Cache-Control", "max-age=60"}}},
			Steps:  []Step{{Fetch: true, Status: 500}, {Fetch: true, Status: 500}}},
		{Name: "CDN-Cache-Control replaces Cache-Control private (RFC 9213)", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "private", "CDN-Cache-Control", "max-age=60"}}},
			Steps:  []Step{{Fetch: true}, {After: time.Second}}},
		{Name: `qualified no-cache="X-Secret": stored without the field (§5.2.2.4)`, Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", `max-age=60, no-cache="X-Secret"`, "X-Secret", "s", "X-Other", "o"}}},
			Steps: []Step{
				{Fetch: true, Headers: []string{"X-Other", "o"}},
				{Headers: []string{"X-Other", "o", "X-Secret", ""}},
			}},
		{Name: `qualified private="X-Secret": stored without the field (§5.2.2.7)`, Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", `max-age=60, private="X-Secret"`, "X-Secret", "s"}}},
			Steps:  []Step{{Fetch: true}, {Headers: []string{"X-Secret", ""}}}},
		{Name: "each URI is its own entry", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=60"}}},
			Steps:  []Step{{Fetch: true}, {Path: "/r/2", Fetch: true, Body: "body-2"}, {Body: "body-1"}, {Path: "/r/2", Body: "body-2"}}},
		{Name: "an unsafe method is forwarded, its answer not stored", Route: originMode,
			Routes: "- name: w\n  methods: [POST]\n  path: /r/{id}",
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=60"}}},
			Steps: []Step{
				{Method: "POST", Fetch: true, Check: func(t *testing.T, r Result) {
					if last := r.Origin[len(r.Origin)-1]; last.Method != "POST" || last.Path != "/r/1" {
						t.Errorf("origin saw %s %s, want POST /r/1", last.Method, last.Path)
					}
				}},
				{Fetch: true, Body: "body-2"},
			}},
		{Name: "route mode: Cache-Control max-age=0 does not prevent storing", Route: "ttl: 60s",
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=0"}}},
			Steps:  []Step{{Fetch: true}, {After: 30 * time.Second, Age: "30"}}},
		{Name: "route mode: no-cache not stored", Route: "ttl: 60s",
			Origin: []Resp{{Header: []string{"Cache-Control", "no-cache", "ETag", `"v1"`}}},
			Steps:  []Step{{Fetch: true}, {Fetch: true}}},
	})
}
