package conformance

import (
	"testing"
)

// RFC 9111 §4.1: a stored response that names request headers in Vary
// answers only requests whose values of those headers match the ones
// that fetched it. The sidecar forwards only keyed headers (README
// "Security model"): the first answer that varies on a withheld header is
// asked for once more with it, so each row's first answer comes twice.
func TestVary(t *testing.T) {
	varies := func(vary, body string) Resp {
		return Resp{Header: []string{"Cache-Control", "max-age=60", "Vary", vary}, Body: body}
	}
	lang := func(v string) []string { return []string{"Accept-Language", v} }
	runTable(t, []Case{
		{Name: "each value of the header is its own entry", Route: originMode,
			Origin: []Resp{varies("Accept-Language", "en"), varies("Accept-Language", "en"), varies("Accept-Language", "fr")},
			Steps: []Step{
				{Header: lang("en"), Fetch: true, Body: "en"},
				{Header: lang("fr"), Fetch: true, Body: "fr"},
				{Header: lang("en"), Body: "en", CacheStatus: "hit"},
				{Header: lang("fr"), Body: "fr", CacheStatus: "hit"},
			}},
		{Name: "the header absent in both requests matches", Route: originMode,
			Origin: []Resp{varies("Accept-Language", "none")},
			Steps:  []Step{{Fetch: true, Body: "none"}, {Body: "none", CacheStatus: "hit"}}},
		{Name: "absent in one, present in the other: no match", Route: originMode,
			Origin: []Resp{varies("Accept-Language", "none"), varies("Accept-Language", "en")},
			Steps:  []Step{{Fetch: true, Body: "none"}, {Header: lang("en"), Fetch: true, Body: "en"}, {Body: "none", CacheStatus: "hit"}}},
		{Name: "two headers: both must match", Route: originMode,
			Origin: []Resp{varies("Accept-Language, X-Tenant", "a"), varies("Accept-Language, X-Tenant", "a"), varies("Accept-Language, X-Tenant", "b")},
			Steps: []Step{
				{Header: []string{"Accept-Language", "en", "X-Tenant", "1"}, Fetch: true, Body: "a"},
				{Header: []string{"Accept-Language", "en", "X-Tenant", "2"}, Fetch: true, Body: "b"},
				{Header: []string{"Accept-Language", "en", "X-Tenant", "1"}, Body: "a", CacheStatus: "hit"},
			}},
		{Name: "Vary: * is never reused (RFC 9110 §12.5.5)", Route: originMode,
			Origin: []Resp{varies("*", "")},
			Steps:  []Step{{Fetch: true}, {Fetch: true}}},
	})
}
