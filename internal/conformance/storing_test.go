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
		{Name: "302 with public: heuristically cacheable (§4.2.2, §5.2.2.9)", Route: originMode,
			Origin: []Resp{{Status: 302, Header: []string{"Location", "/elsewhere", "Cache-Control", "public", "Last-Modified", "{now-3600}"}}},
			Steps:  []Step{{Fetch: true, Status: 302}, {After: 300 * time.Second, Status: 302, Age: "300"}, {After: 61 * time.Second, Fetch: true, Cond: "If-Modified-Since: {epoch-3600}", Status: 302}}},
		{Name: "404 with public: heuristically cacheable without negative_ttl", Route: originMode,
			Origin: []Resp{{Status: 404, Header: []string{"Cache-Control", "public", "Last-Modified", "{now-3600}"}}},
			Steps:  []Step{{Fetch: true, Status: 404}, {After: 300 * time.Second, Status: 404}}},
		{Name: "404 with max-age: stored", Route: originMode,
			Origin: []Resp{{Status: 404, Header: []string{"Cache-Control", "max-age=60"}}},
			Steps:  []Step{{Fetch: true, Status: 404}, {Status: 404}}},
		{Name: "404 without freshness: only under negative_ttl", Route: originMode + "\nttl: 60s",
			Origin: []Resp{{Status: 404}},
			Steps:  []Step{{Fetch: true, Status: 404}, {Fetch: true, Status: 404}}},
		{Name: "405 and 414 are heuristically cacheable: under negative_ttl (RFC 9110 §15.1)", Route: originMode + "\nnegative_ttl: 30s",
			Origin: []Resp{{Status: 405}, {Status: 414}},
			Steps: []Step{
				{Fetch: true, Status: 405}, {Status: 405, CacheStatus: "hit"},
				{Path: "/r/2", Fetch: true, Status: 414}, {Path: "/r/2", Status: 414, CacheStatus: "hit"},
			}},
		{Name: "403 with max-age: stored (§3: any final status with explicit freshness)", Route: originMode,
			Origin: []Resp{{Status: 403, Header: []string{"Cache-Control", "max-age=60"}}},
			Steps:  []Step{{Fetch: true, Status: 403}, {Status: 403, CacheStatus: "hit"}}},
		{Name: "403 without freshness: not stored", Route: originMode,
			Origin: []Resp{{Status: 403, Header: []string{"Last-Modified", "{now-3600}"}}},
			Steps:  []Step{{Fetch: true, Status: 403}, {Fetch: true, Status: 403}}},
		{Name: "route mode: 403 with max-age not stored", Route: "ttl: 60s",
			Origin: []Resp{{Status: 403, Header: []string{"Cache-Control", "max-age=60"}}},
			Steps:  []Step{{Fetch: true, Status: 403}, {Fetch: true, Status: 403}}},
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
		{Name: "hop-by-hop fields, and those Connection names, are not stored (§3.1)", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=60", "Connection", "X-Hop", "X-Hop", "1", "Keep-Alive", "timeout=5", "X-End", "2"}}},
			Steps: []Step{
				{Fetch: true},
				{CacheStatus: "hit", Headers: []string{"X-Hop", "", "Keep-Alive", "", "X-End", "2"}},
			}},
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

// RFC 9111 §3.5: storing responses to requests with Authorization. The
// RFC lets a shared cache store and reuse them for everyone when the
// response says public, s-maxage or must-revalidate; the sidecar does not
// (docs/configuration.md, "Requests that bypass the cache"): its key does
// not see the credential, so one such directive sent by mistake — a
// framework's blanket s-maxage, the common "max-age=0, must-revalidate" on
// a per-user answer — would hand one caller's answer to every other caller,
// the unauthenticated included. A route that lists Authorization under
// key.headers caches per credential instead.
func TestAuthorization(t *testing.T) {
	alice := []string{"Authorization", "Bearer alice"}
	bob := []string{"Authorization", "Bearer bob"}
	for _, cc := range []string{"public, max-age=60", "s-maxage=60", "max-age=60, must-revalidate"} {
		t.Run(cc, func(t *testing.T) {
			runTable(t, []Case{
				{Name: "not stored, not reused", Route: originMode,
					Origin: []Resp{{Header: []string{"Cache-Control", cc}}},
					Steps: []Step{
						{Header: alice, Fetch: true, Body: "body-1", CacheStatus: "fwd=bypass"},
						{Header: alice, Fetch: true, Body: "body-2"},
						{Header: bob, Fetch: true, Body: "body-3"},
						{Fetch: true, Body: "body-4"},
					}},
				{Name: "key.headers [Authorization]: one entry per credential", Route: originMode + "\nkey: {headers: [Authorization]}",
					Origin: []Resp{{Header: []string{"Cache-Control", cc}}},
					Steps: []Step{
						{Header: alice, Fetch: true, Body: "body-1"},
						{Header: alice, Body: "body-1", CacheStatus: "hit"},
						{Header: bob, Fetch: true, Body: "body-2"},
						{Fetch: true, Body: "body-3"},
						{Header: bob, Body: "body-2"},
					}},
			})
		})
	}
}
