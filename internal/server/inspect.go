package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/sidecache/sidecache/internal/admin"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/surrogate"
)

// maxListedKeys bounds the L1 keys of one path an inspection lists.
const maxListedKeys = 100

// Inspection is the answer of GET /cache (docs/admin-api.md): the route and
// key a GET of the URL has, what each tier holds under that key (and under
// the variant key the given headers pick), and every key of the URL's path
// in this replica's L1, whatever its host, query or variant.
type Inspection struct {
	URL       string      `json:"url"`
	Route     string      `json:"route"`
	Cacheable bool        `json:"cacheable"`
	Key       string      `json:"key"`
	Cached    bool        `json:"cached"`
	Entries   []EntryView `json:"entries"`
	L1Keys    []string    `json:"l1_keys"`
	// L1KeysTruncated: the path has more than maxListedKeys keys in L1.
	L1KeysTruncated bool `json:"l1_keys_truncated,omitempty"`
	// Errors names a tier that could not be read (Redis unreachable).
	Errors map[string]string `json:"errors,omitempty"`
}

// EntryView is one stored entry as an operator reads it. Durations are Go
// duration strings, on the entry's age axis (RFC 9111 §4.2.3).
type EntryView struct {
	Tier     string `json:"tier"`
	Key      string `json:"key"`
	Status   int    `json:"status,omitempty"`
	StoredAt string `json:"stored_at"`
	Age      string `json:"age"`
	TTL      string `json:"ttl"`
	TTLLeft  string `json:"ttl_left"`
	Fresh    bool   `json:"fresh"`
	// The stale windows (RFC 5861) as stored, and whether they still apply.
	StaleWhileRevalidate       string `json:"stale_while_revalidate"`
	StaleIfError               string `json:"stale_if_error"`
	WithinStaleWhileRevalidate bool   `json:"within_stale_while_revalidate"`
	WithinStaleIfError         bool   `json:"within_stale_if_error"`
	// Remaining is how long the tier keeps the entry at most.
	Remaining string   `json:"remaining"`
	Tags      []string `json:"tags"`
	// Variants, on a variants marker, are the request headers that pick
	// the variant (the answer's Vary); such an entry holds no response.
	Variants     []string `json:"variants,omitempty"`
	Size         int64    `json:"size"`
	ETag         string   `json:"etag,omitempty"`
	LastModified string   `json:"last_modified,omitempty"`
}

func viewEntry(tier, key string, e *cache.Entry, now time.Time) EntryView {
	v := EntryView{
		Tier: tier, Key: key, Status: e.Status, StoredAt: e.StoredAt.UTC().Format(time.RFC3339Nano),
		Age: e.Age(now).String(), TTL: e.TTL.String(), TTLLeft: e.TTLLeft(now).String(), Fresh: e.Fresh(now),
		StaleWhileRevalidate: e.StaleWhileRevalidate.String(), StaleIfError: e.StaleIfError.String(),
		WithinStaleWhileRevalidate: !e.Fresh(now) && e.WithinStaleWhileRevalidate(now),
		WithinStaleIfError:         !e.Fresh(now) && e.WithinStaleIfError(now),
		Remaining:                  e.Remaining(now).String(), Tags: e.Tags, Variants: e.Variants,
		Size: e.KeyedSize(key),
	}
	v.ETag, v.LastModified = e.ETag(), e.Header.Get("Last-Modified")
	if v.Tags == nil {
		v.Tags = []string{}
	}
	return v
}

// inspector serves GET /cache.
type inspector struct{ s *Server }

// Inspect reads each tier directly (no metrics, no promotion into L1, and
// entries the coherence bound would refuse are shown: the operator asks
// what is stored, not what a request would get).
func (in *inspector) Inspect(ctx context.Context, target *url.URL, h http.Header) (any, error) {
	s := in.s
	rt, _, ok := s.proxy.Routes().Match(http.MethodGet, target.Path)
	if !ok {
		return nil, fmt.Errorf("no route takes GET %s: %w", target.Path, admin.ErrNotFound)
	}
	r := &http.Request{Method: http.MethodGet, URL: target, Host: target.Host, Header: h}
	key := cachekey.Build(r, &rt.Key)
	out := &Inspection{URL: target.String(), Route: rt.Name, Cacheable: rt.Cacheable(), Key: key,
		Entries: []EntryView{}, L1Keys: []string{}}
	now := time.Now()
	if s.opts.Now != nil {
		now = s.opts.Now()
	}
	type tier struct {
		name string
		st   cache.Store
	}
	var tiers []tier
	if s.l1 != nil {
		tiers = append(tiers, tier{string(cache.TierL1), s.l1})
	}
	if s.l2 != nil {
		tiers = append(tiers, tier{string(cache.TierL2), s.l2})
	}
	for _, t := range tiers {
		e, found, err := t.st.Get(ctx, key)
		if err != nil {
			if out.Errors == nil {
				out.Errors = map[string]string{}
			}
			out.Errors[t.name] = err.Error()
			continue
		}
		if !found || e == nil {
			continue
		}
		out.Entries = append(out.Entries, viewEntry(t.name, key, e, now))
		if !e.IsVariants() {
			continue
		}
		// A variant keyed on Accept-Encoding is stored per coding: show
		// each one the other headers select.
		codings := []string{""}
		if slices.Contains(e.Variants, "Accept-Encoding") {
			codings = []string{cachekey.Identity, "gzip", "br", "zstd"}
		}
		for _, coding := range codings {
			vkey := cachekey.WithVary(key, e.Variants, h, coding)
			if ve, found, err := t.st.Get(ctx, vkey); err == nil && found && ve != nil {
				out.Entries = append(out.Entries, viewEntry(t.name, vkey, ve, now))
			}
		}
	}
	for _, e := range out.Entries {
		out.Cached = out.Cached || e.Variants == nil
	}
	if s.l1 != nil {
		out.L1Keys, out.L1KeysTruncated = s.l1.KeysWithTag(surrogate.URITag(target.Path), maxListedKeys)
		if out.L1Keys == nil {
			out.L1Keys = []string{}
		}
	}
	return out, nil
}

// PurgeURL drops every entry of the URL's path through its URI tag: every
// host, query and variant, on every replica and in L2. Wider than the one
// URL, as invalidation is (a miss costs less than a stale variant kept).
func (p *purger) PurgeURL(ctx context.Context, target *url.URL) (int, error) {
	return p.purgeTags(ctx, surrogate.URITag(target.Path))
}
