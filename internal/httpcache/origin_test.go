package httpcache

import (
	"net/http"
	"reflect"
	"testing"
	"time"
)

func TestOriginStorage(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) string { return now.Add(d).Format(http.TimeFormat) }
	const sec = time.Second
	tests := []struct {
		name   string
		o      Origin
		status int
		h      http.Header
		want   Storage
	}{
		{"max-age", Origin{}, 200, hdr("Cache-Control", "max-age=60"),
			Storage{Shareable: true, Cacheable: true, Store: true, TTL: 60 * sec}},
		{"no freshness, no validator: not worth storing", Origin{}, 200, hdr(),
			Storage{Shareable: true, Cacheable: true}},
		{"route ttl is the heuristic", Origin{Heuristic: 30 * sec}, 200, hdr(),
			Storage{Shareable: true, Cacheable: true, Store: true, TTL: 30 * sec}},
		{"no-store", Origin{}, 200, hdr("Cache-Control", "no-store, max-age=60"),
			Storage{Cacheable: true, Store: true, TTL: 60 * sec}},
		{"private", Origin{}, 200, hdr("Cache-Control", "private, max-age=60"),
			Storage{Cacheable: true, Store: true, TTL: 60 * sec}},
		{"Set-Cookie", Origin{}, 200, hdr("Cache-Control", "max-age=60", "Set-Cookie", "a=b"),
			Storage{Cacheable: true, Store: true, TTL: 60 * sec}},
		{"Set-Cookie2", Origin{}, 200, hdr("Cache-Control", "max-age=60", "Set-Cookie2", `a="b"; Version="1"`),
			Storage{Cacheable: true, Store: true, TTL: 60 * sec}},
		{"qualified private strips", Origin{}, 200, hdr("Cache-Control", `private="X-A", no-cache="X-B", max-age=60`),
			Storage{Shareable: true, Cacheable: true, Store: true, TTL: 60 * sec, Strip: []string{"X-B", "X-A"}}},
		{"private beside a qualified private is private", Origin{}, 200, hdr("Cache-Control", `private="X-A", private, max-age=60`),
			Storage{Cacheable: true, Store: true, TTL: 60 * sec, Strip: []string{"X-A"}}},
		{"no-cache beside a qualified no-cache is no-cache", Origin{}, 200, hdr("Cache-Control", `no-cache, no-cache="X-A", max-age=60`),
			Storage{Shareable: true, Cacheable: true, NoStale: true, Strip: []string{"X-A"}}},
		{"targeted field replaces Cache-Control", Origin{}, 200, hdr("Cache-Control", "private", "CDN-Cache-Control", "max-age=10"),
			Storage{Shareable: true, Cacheable: true, Store: true, TTL: 10 * sec}},
		{"no targets: Cache-Control", Origin{Targets: []string{}}, 200, hdr("Cache-Control", "private", "CDN-Cache-Control", "max-age=10"),
			Storage{Cacheable: true}},
		{"308", Origin{}, 308, hdr("Cache-Control", "max-age=60"),
			Storage{Shareable: true, Cacheable: true, Store: true, TTL: 60 * sec}},
		{"308 by the heuristic", Origin{Heuristic: time.Minute}, 308, hdr(),
			Storage{Shareable: true, Cacheable: true, Store: true, TTL: time.Minute}},
		{"301 by the heuristic", Origin{Heuristic: time.Minute}, 301, hdr(),
			Storage{Shareable: true, Cacheable: true, Store: true, TTL: time.Minute}},
		{"204 by the heuristic", Origin{Heuristic: time.Minute}, 204, hdr(),
			Storage{Shareable: true, Cacheable: true, Store: true, TTL: time.Minute}},
		{"404 with explicit freshness", Origin{}, 404, hdr("Cache-Control", "max-age=60"),
			Storage{Shareable: true, Cacheable: true, Store: true, TTL: 60 * sec}},
		{"404 without: negative is its heuristic", Origin{Negative: 5 * sec, Heuristic: time.Hour}, 404, hdr(),
			Storage{Shareable: true, Cacheable: true, Store: true, TTL: 5 * sec}},
		{"414 without anything", Origin{Heuristic: time.Hour}, 414, hdr(),
			Storage{Shareable: true}},
		{"410 public: the heuristic", Origin{Heuristic: time.Minute}, 410, hdr("Cache-Control", "public"),
			Storage{Shareable: true, Cacheable: true, Store: true, TTL: time.Minute}},
		{"206 never", Origin{}, 206, hdr("Cache-Control", "max-age=60"),
			Storage{Shareable: true, Store: true, TTL: 60 * sec}},
		{"304 never", Origin{}, 304, hdr("Cache-Control", "max-age=60"),
			Storage{Shareable: true, Store: true, TTL: 60 * sec}},
		{"302 with explicit freshness", Origin{}, 302, hdr("Expires", at(time.Minute), "Date", at(0)),
			Storage{Shareable: true, Cacheable: true, Store: true, TTL: time.Minute}},
		{"302 without", Origin{Heuristic: time.Minute}, 302, hdr(),
			Storage{Shareable: true, Store: true, TTL: time.Minute}},
		{"5xx never", Origin{}, 503, hdr("Cache-Control", "public, max-age=60"),
			Storage{Shareable: true, Store: true, TTL: 60 * sec}},
		{"1xx never", Origin{}, 103, hdr("Cache-Control", "max-age=60"),
			Storage{Shareable: true, Store: true, TTL: 60 * sec}},
		{"max ttl caps", Origin{MaxTTL: 10 * sec}, 200, hdr("Cache-Control", "max-age=60"),
			Storage{Shareable: true, Cacheable: true, Store: true, TTL: 10 * sec}},
		{"stale windows: the longer", Origin{StaleWhileRevalidate: 5 * sec, StaleIfError: time.Hour}, 200,
			hdr("Cache-Control", "max-age=1, stale-while-revalidate=30, stale-if-error=60"),
			Storage{Shareable: true, Cacheable: true, Store: true, TTL: sec, StaleWhileRevalidate: 30 * sec, StaleIfError: time.Hour}},
		{"must-revalidate: no stale windows", Origin{StaleIfError: time.Hour}, 200, hdr("Cache-Control", "max-age=1, must-revalidate"),
			Storage{Shareable: true, Cacheable: true, Store: true, TTL: sec, NoStale: true}},
		{"no-cache with a validator: stored, never fresh", Origin{StaleIfError: time.Hour}, 200, hdr("Cache-Control", "no-cache, max-age=60", "Etag", `"a"`),
			Storage{Shareable: true, Cacheable: true, Store: true, NoStale: true}},
		{"no-cache without: not stored", Origin{}, 200, hdr("Cache-Control", "no-cache, max-age=60"),
			Storage{Shareable: true, Cacheable: true, NoStale: true}},
		{"arrived stale: not stored", Origin{}, 200, hdr("Cache-Control", "max-age=60", "Age", "100"),
			Storage{Shareable: true, Cacheable: true, TTL: 60 * sec}},
		{"arrived stale, usable stale", Origin{}, 200, hdr("Cache-Control", "max-age=60, stale-if-error=100", "Age", "100"),
			Storage{Shareable: true, Cacheable: true, Store: true, TTL: 60 * sec, StaleIfError: 100 * sec}},
		{"arrived stale with a validator", Origin{}, 200, hdr("Cache-Control", "max-age=60", "Age", "100", "Last-Modified", at(-time.Hour)),
			Storage{Shareable: true, Cacheable: true, Store: true, TTL: 60 * sec}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stored := StoredHeader(tt.h)
			got := tt.o.Storage(tt.status, tt.h, stored, now, now)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestOriginStorageStoredValidator: the validator that counts is the one
// the entry keeps, not the upstream's.
func TestOriginStorageStoredValidator(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	up := hdr("Cache-Control", "max-age=0", "Etag", `"a"`)
	if s := (Origin{}).Storage(200, up, hdr(), now, now); s.Store {
		t.Errorf("stored without a kept validator: %+v", s)
	}
	if s := (Origin{}).Storage(200, up, up, now, now); !s.Store {
		t.Errorf("not stored with a kept validator: %+v", s)
	}
}
