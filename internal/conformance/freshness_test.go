package conformance

import (
	"testing"
	"time"
)

// RFC 9111 §4.2: freshness — the lifetime (§4.2.1), the heuristic
// (§4.2.2), RFC 9213 targeted fields and the route's own settings.
func TestFreshness(t *testing.T) {
	runTable(t, []Case{
		{Name: "max-age: fresh until it is reached", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=60"}}},
			Steps: []Step{
				{Fetch: true},
				{After: 59 * time.Second, Age: "59"},
				{After: time.Second, Fetch: true, Body: "body-2"},
			}},
		{Name: "s-maxage overrides max-age (§5.2.2.10)", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=600, s-maxage=10"}}},
			Steps:  []Step{{Fetch: true}, {After: 9 * time.Second}, {After: 2 * time.Second, Fetch: true}}},
		{Name: "Expires minus Date", Route: originMode,
			Origin: []Resp{{Header: []string{"Expires", "{now+60}"}}},
			Steps:  []Step{{Fetch: true}, {After: 30 * time.Second}, {After: 31 * time.Second, Fetch: true}}},
		{Name: "Expires in the past: stale at once", Route: originMode,
			Origin: []Resp{{Header: []string{"Expires", "{now-10}"}}},
			Steps:  []Step{{Fetch: true}, {Fetch: true}}},
		{Name: "invalid Expires is in the past (§5.3)", Route: originMode,
			Origin: []Resp{{Header: []string{"Expires", "0"}}},
			Steps:  []Step{{Fetch: true}, {Fetch: true}}},
		{Name: "max-age overrides Expires", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=10", "Expires", "{now+3600}"}}},
			Steps:  []Step{{Fetch: true}, {After: 11 * time.Second, Fetch: true}}},
		{Name: "heuristic: 10% of the time since Last-Modified (§4.2.2)", Route: originMode,
			Origin: []Resp{{Header: []string{"Last-Modified", "{epoch-1000}"}}},
			Steps: []Step{
				{Fetch: true},
				{After: 99 * time.Second},
				{After: 2 * time.Second, Fetch: true, Cond: "If-Modified-Since: {epoch-1000}"},
			}},
		{Name: "ttl is the heuristic in origin mode", Route: originMode + "\nttl: 30s",
			Origin: []Resp{{}},
			Steps:  []Step{{Fetch: true}, {After: 29 * time.Second}, {After: 2 * time.Second, Fetch: true}}},
		{Name: "ttl does not override explicit freshness", Route: originMode + "\nttl: 300s",
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=10"}}},
			Steps:  []Step{{Fetch: true}, {After: 11 * time.Second, Fetch: true}}},
		{Name: "max_ttl caps max-age", Route: originMode + "\nmax_ttl: 10s",
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=3600"}}},
			Steps:  []Step{{Fetch: true}, {After: 9 * time.Second}, {After: 2 * time.Second, Fetch: true}}},
		{Name: "CDN-Cache-Control overrides Cache-Control (RFC 9213)", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=5", "CDN-Cache-Control", "max-age=60"}}},
			Steps:  []Step{{Fetch: true}, {After: 30 * time.Second}, {After: 31 * time.Second, Fetch: true}}},
		{Name: "Surrogate-Control overrides Cache-Control", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "no-store", "Surrogate-Control", "max-age=60"}}},
			Steps:  []Step{{Fetch: true}, {After: 30 * time.Second}}},
		{Name: "targeted_fields: [] obeys Cache-Control only", Route: originMode + "\ntargeted_fields: []",
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=5", "CDN-Cache-Control", "max-age=60"}}},
			Steps:  []Step{{Fetch: true}, {After: 6 * time.Second, Fetch: true}}},
		{Name: "targeted_fields: a field of one's own first", Route: originMode + "\ntargeted_fields: [Sidecache-Control, CDN-Cache-Control]",
			Origin: []Resp{{Header: []string{"CDN-Cache-Control", "max-age=5", "Sidecache-Control", "max-age=60"}}},
			Steps:  []Step{{Fetch: true}, {After: 30 * time.Second}}},
		{Name: `quoted max-age="60" is max-age=60 (§5.2)`, Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", `max-age="60"`}}},
			Steps:  []Step{{Fetch: true}, {After: 59 * time.Second, Age: "59"}, {After: 2 * time.Second, Fetch: true}}},
		{Name: "max-age=-1 is invalid: stale at once (§4.2.1)", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=-1"}}},
			Steps:  []Step{{Fetch: true}, {After: time.Second, Fetch: true}}},
		{Name: "a huge max-age is capped, not wrapped (§1.2.2)", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=99999999999999999999"}}},
			Steps:  []Step{{Fetch: true}, {After: 24 * time.Hour, Age: "86400"}}},
		{Name: "duplicate max-age: the first counts (§4.2.1)", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=10, max-age=600"}}},
			Steps:  []Step{{Fetch: true}, {After: 11 * time.Second, Fetch: true}}},
		{Name: "must-understand, no-store: not stored (SPEC: never a no-store answer)", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=60, must-understand, no-store"}}},
			Steps:  []Step{{Fetch: true}, {Fetch: true}}},
		{Name: "route mode: ttl governs, max-age ignored", Route: "ttl: 10s",
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=3600"}}},
			Steps:  []Step{{Fetch: true}, {After: 9 * time.Second}, {After: 2 * time.Second, Fetch: true}}},
	})
}

// RFC 9111 §4.2.3: the age of a response, kept and added to.
func TestAge(t *testing.T) {
	runTable(t, []Case{
		{Name: "no upstream Age: the time since the fetch", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=60"}}},
			Steps:  []Step{{Fetch: true, Age: "-"}, {After: 5 * time.Second, Age: "5"}}},
		{Name: "upstream Age kept on a miss and added to on hits", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=60", "Age", "30"}}},
			Steps: []Step{
				{Fetch: true, Age: "30"},
				{After: 10 * time.Second, Age: "40"},
				{After: 21 * time.Second, Fetch: true},
			}},
		{Name: "upstream Age counts against max-age", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=60", "Age", "50"}}},
			Steps:  []Step{{Fetch: true}, {After: 9 * time.Second, Age: "59"}, {After: 2 * time.Second, Fetch: true}}},
		{Name: "apparent age from Date", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=60", "Date", "{now-20}"}}},
			Steps:  []Step{{Fetch: true, Age: "20"}, {After: 39 * time.Second, Age: "59"}, {After: 2 * time.Second, Fetch: true}}},
		{Name: "Age over max-age: stale on arrival", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=60", "Age", "100"}}},
			Steps:  []Step{{Fetch: true, Age: "100"}, {Fetch: true}}},
		{Name: "an invalid Age is ignored (§5.1)", Route: originMode,
			Origin: []Resp{{Header: []string{"Cache-Control", "max-age=60", "Age", "abc"}}},
			Steps:  []Step{{Fetch: true}, {After: 10 * time.Second, Age: "10"}}},
		{Name: "route mode: Age kept and added to, ttl counted from the fetch", Route: "ttl: 60s",
			Origin: []Resp{{Header: []string{"Age", "100"}}},
			Steps: []Step{
				{Fetch: true, Age: "100"},
				{After: 30 * time.Second, Age: "130", CacheStatus: "ttl=30"},
				{After: 29 * time.Second, Age: "159"},
				{After: 2 * time.Second, Fetch: true},
			}},
	})
}
