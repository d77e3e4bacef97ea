package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/metrics"
	"github.com/sidecache/sidecache/internal/route"
)

// flight is what one upstream fetch (or cache re-check) hands to the
// request that ran it and to every request collapsed onto it.
type flight struct {
	e         *cache.Entry // the response, stored or not
	tier      cache.Tier   // set when the leader found it in the cache after all
	stored    bool
	shareable bool // false: private to the leader's client; waiters fetch their own
	tooLarge  bool // over max_body_bytes: everyone streams it through instead
	batched   bool
	vkey      string // the variant key the response was stored under, if Vary
	vary      []string
	stale     *cache.Entry // a stale entry the leader found, for stale-if-error
}

func (h *Handler) serveCached(w http.ResponseWriter, r *http.Request, st *state, rt *route.Route, params route.Params, rm *metrics.RouteMetrics, start time.Time) {
	if reason := bypassReason(r, rt.Key.Headers); reason != "" {
		h.passThrough(w, r, rm, start, status{fwd: "bypass", detail: reason}, nil)
		return
	}
	ctx := r.Context()
	key := cachekey.Build(r, &rt.Key)
	if h.hfp.active(key, h.now()) {
		h.passThrough(w, r, rm, start, status{fwd: "bypass", detail: "hit-for-pass"}, nil)
		return
	}
	refresh := refreshRequested(r)
	var stale *cache.Entry
	flightKey := key
	if !refresh {
		e, tier, vkey, _ := h.lookup(ctx, key, r, true)
		if vkey != "" {
			flightKey = vkey
		}
		if e != nil && acceptsEncoding(r, e.Header) {
			now := h.now()
			switch {
			case e.Fresh(now):
				h.writeEntry(w, r, e, status{hit: true, ttl: e.TTLLeft(now), hasTTL: true, detail: string(tier)}, true)
				rm.Request(metrics.Hit, h.now().Sub(start))
				return
			case e.WithinStaleWhileRevalidate(now):
				h.revalidate(st, rt, params, r, key, flightKey)
				h.writeEntry(w, r, e, status{fwd: "stale", ttl: e.TTL - e.Age(now), hasTTL: true, detail: "stale-while-revalidate"}, true)
				rm.Request(metrics.Stale, h.now().Sub(start))
				return
			}
			stale = e
		}
	} else {
		flightKey += "\x00refresh"
	}

	f, leader, err := h.flights.Do(ctx, flightKey, func(fctx context.Context) (*flight, error) {
		return h.fill(fctx, st, rt, params, r, key, refresh)
	})
	if ctx.Err() != nil {
		return // the client left while waiting; the flight goes on for others
	}
	if stale == nil && f != nil {
		stale = f.stale
	}
	if err == nil && !f.tooLarge && !leader && !h.usable(f, r, key) {
		// Not for this client: private, or another variant. It fetches on
		// its own, outside any flight.
		f, err = h.fetch(context.WithoutCancel(ctx), rt, params, r, key)
		leader = true
	}
	if err == nil && f.tooLarge {
		h.passThrough(w, r, rm, start, status{fwd: "miss", detail: "too-large"}, nil)
		return
	}
	failed := err != nil || f.e.Status >= 500
	if failed && stale != nil && stale.WithinStaleIfError(h.now()) {
		st := status{fwd: "stale", detail: "stale-if-error", ttl: stale.TTL - stale.Age(h.now()), hasTTL: true}
		if err == nil {
			st.fwdStatus = f.e.Status
		}
		h.writeEntry(w, r, stale, st, true)
		rm.Request(metrics.Stale, h.now().Sub(start))
		return
	}
	if err != nil {
		writeUpstreamError(w, classify(err), status{fwd: "miss"})
		rm.Request(metrics.Miss, h.now().Sub(start))
		return
	}
	s := status{fwd: "miss", fwdStatus: f.e.Status, stored: f.stored}
	result := metrics.Miss
	switch {
	case f.tier != "":
		s = status{hit: true, ttl: f.e.TTLLeft(h.now()), hasTTL: true, detail: string(f.tier)}
		result = metrics.Hit
	case !leader:
		s.collapsed = true
		result = metrics.Collapsed
		rm.Coalesced()
	}
	if refresh {
		s.fwd = "request"
	}
	if f.batched {
		s.detail = "batch"
	}
	h.writeEntry(w, r, f.e, s, f.tier != "")
	rm.Request(result, h.now().Sub(start))
}

// lookup reads the cache, following a variants marker to the variant this
// request selects (RFC 9111 §4.1). A tier error is a miss: the request goes
// on without that tier.
//
// local reads L1 only: requests look there before joining a flight, and
// the flight's leader alone goes on to L2. An entry that predates an
// invalidation of one of its tags (see tombstones) is a miss.
func (h *Handler) lookup(ctx context.Context, key string, r *http.Request, local bool) (e *cache.Entry, tier cache.Tier, vkey string, vary []string) {
	get := h.cache.Lookup
	if local {
		get = h.cache.LookupLocal
	}
	e, tier, _ = get(ctx, key)
	return h.resolve(ctx, get, key, r, e, tier)
}

// resolve finishes a lookup of key whose first read gave e: it follows a
// variants marker with get, and drops an entry that predates an
// invalidation. The split path reads many keys at once and resolves each.
func (h *Handler) resolve(ctx context.Context, get func(context.Context, string) (*cache.Entry, cache.Tier, error), key string, r *http.Request, e *cache.Entry, tier cache.Tier) (*cache.Entry, cache.Tier, string, []string) {
	var vkey string
	var vary []string
	if e != nil && e.IsVariants() {
		vary = e.Variants
		vkey = cachekey.WithVary(key, vary, r.Header)
		e, tier, _ = get(ctx, vkey)
		if e != nil && e.IsVariants() {
			return nil, "", vkey, vary // a marker where a response belongs: a miss
		}
	}
	if h.tombs.Stale(e, h.now()) {
		return nil, "", vkey, vary
	}
	return e, tier, vkey, vary
}

// cachedFlight is a flight answered from the cache after all. It carries
// the variant it is, so waiters of another variant do not take it.
func cachedFlight(e *cache.Entry, tier cache.Tier, vkey string, vary []string) *flight {
	return &flight{e: e, tier: tier, shareable: true, vkey: vkey, vary: vary}
}

// usable reports whether a waiter may take the leader's response: only a
// shareable one, of the variant this request selects, in an encoding it
// accepts.
func (h *Handler) usable(f *flight, r *http.Request, key string) bool {
	if !f.shareable || f.tooLarge || h.tombs.Stale(f.e, h.now()) {
		return false
	}
	if len(f.vary) > 0 && cachekey.WithVary(key, f.vary, r.Header) != f.vkey {
		return false
	}
	return acceptsEncoding(r, f.e.Header)
}

// fill runs once per flight: re-check the cache (another flight may have
// just filled it), take the cluster lease when there is one, then fetch.
func (h *Handler) fill(ctx context.Context, st *state, rt *route.Route, params route.Params, r *http.Request, key string, refresh bool) (*flight, error) {
	var stale *cache.Entry
	if !refresh {
		e, tier, vkey, vary := h.lookup(ctx, key, r, false)
		if h.servable(e, r) {
			return cachedFlight(e, tier, vkey, vary), nil
		}
		if e != nil && e.WithinStaleIfError(h.now()) && acceptsEncoding(r, e.Header) {
			stale = e
		}
	}
	f, err := h.fillUpstream(ctx, st, rt, params, r, key, refresh)
	if f != nil {
		f.stale = stale
	} else if stale != nil {
		// Keep the stale entry reachable for the waiters' stale-if-error.
		f = &flight{stale: stale}
	}
	return f, err
}

func (h *Handler) fillUpstream(ctx context.Context, st *state, rt *route.Route, params route.Params, r *http.Request, key string, refresh bool) (*flight, error) {
	if b := st.batchers[rt]; b != nil && r.URL.RawQuery == "" {
		return h.loadBatched(ctx, b, rt, params, r)
	}
	// One deadline for waiting on another replica's lease and fetching
	// after it: a client gets its 504 at upstream.timeout, not twice that.
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	if h.leaser != nil && !refresh {
		release, acquired, err := h.leaser.Lease(ctx, key, h.leaseTTL)
		switch {
		case err != nil:
			// The shared tier is unreachable: fetch as a lone replica would.
		case acquired:
			defer release()
		default:
			if _, ok, _ := h.leaser.WaitFill(ctx, key, h.leaseTTL); ok {
				if e, tier, vkey, vary := h.lookup(ctx, key, r, false); h.servable(e, r) {
					return cachedFlight(e, tier, vkey, vary), nil
				}
			}
		}
	}
	return h.fetch(ctx, rt, params, r, key)
}

// servable reports whether a looked-up entry answers r as it is: fresh, and
// in a content-coding r accepts.
func (h *Handler) servable(e *cache.Entry, r *http.Request) bool {
	return e != nil && e.Fresh(h.now()) && acceptsEncoding(r, e.Header)
}

// fetch makes one upstream GET for r and stores the answer if it may.
func (h *Handler) fetch(ctx context.Context, rt *route.Route, params route.Params, r *http.Request, key string) (*flight, error) {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	out := h.outgoing(ctx, r, r.URL.Path, r.URL.RawQuery)
	rm := h.m.Route(rt.Name)
	t0 := h.now()
	resp, err := h.transport.RoundTrip(out)
	if err != nil {
		rm.Upstream(0, h.now().Sub(t0))
		return nil, classify(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, h.maxBody+1))
	rm.Upstream(resp.StatusCode, h.now().Sub(t0))
	if err != nil {
		return nil, classify(err)
	}
	if int64(len(body)) > h.maxBody {
		// Remember for a while that this key streams through (Varnish's
		// hit-for-pass), so the next requests do not read it twice.
		h.hfp.add(key, h.now().Add(min(rt.TTL, 2*time.Minute)))
		return &flight{tooLarge: true}, nil
	}
	return h.store(ctx, rt, params, r, key, t0, resp.StatusCode, resp.Header, body), nil
}

// store decides whether a fetched response may be kept (SPEC "Cacheable
// responses"; RFC 9111 §3) and keeps it in every tier.
//
// requested is when the request left for the upstream: the entry's age
// counts from then (RFC 9111 §4.2.3), and an invalidation after it means
// the answer may predate the write.
func (h *Handler) store(ctx context.Context, rt *route.Route, params route.Params, r *http.Request, key string, requested time.Time, code int, header http.Header, body []byte) *flight {
	// Tags and variant are set before deciding whether to store: a waiter
	// checks both even on a response nobody keeps (tombstones, Vary).
	e := &cache.Entry{Status: code, Header: storedHeader(header), Body: body, StoredAt: requested, Tags: entryTags(rt, params)}
	f := &flight{e: e, shareable: !private(header)}
	negative, ok := cacheableStatus(code, rt.NegativeTTL)
	names, star := cachekey.ParseVary(header)
	if ce := header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") && !slices.Contains(names, "Accept-Encoding") {
		// Compressed without saying so in Vary: store it as the variant it
		// is (RFC 9110 §12.5.3), so other clients never receive it.
		names = append(names, "Accept-Encoding")
		slices.Sort(names)
	}
	if len(names) > 0 {
		f.vary, f.vkey = names, cachekey.WithVary(key, names, r.Header)
	}
	if star {
		f.shareable = false // Vary: * matches no other request (RFC 9110 §12.5.5)
	}
	if !ok || !f.shareable || cacheControlHas(header, "no-cache") {
		return f
	}
	if negative {
		e.TTL = rt.NegativeTTL
	} else {
		e.TTL, e.StaleWhileRevalidate, e.StaleIfError = rt.TTL, rt.StaleWhileRevalidate, rt.StaleIfError
	}
	if h.tombs.Stale(e, h.now()) {
		return f // fetched before a write to it was invalidated: serve, never keep
	}
	skey := key
	if len(names) > 0 {
		skey = f.vkey
		marker := &cache.Entry{Variants: names, StoredAt: requested, TTL: e.TTL, StaleWhileRevalidate: e.StaleWhileRevalidate, StaleIfError: e.StaleIfError, Tags: e.Tags}
		_ = h.cache.Set(ctx, key, marker)
	}
	if err := h.cache.Set(ctx, skey, e); err != nil {
		h.log.Debug("cache set", "key", skey, "err", err)
		return f
	}
	f.stored = true
	return f
}

// RouteTag is the implicit tag every entry of a route carries, so that a
// purge by route is a purge by tag. Tags starting with "_" are reserved.
func RouteTag(name string) string { return "_route:" + name }

func entryTags(rt *route.Route, params route.Params) []string {
	tags := make([]string, 0, len(rt.Tags)+1)
	tags = append(tags, RouteTag(rt.Name))
	return append(tags, expand(rt.Tags, params)...)
}

// revalidate starts one background refresh of a stale entry (RFC 5861 §3),
// collapsed with any refresh or miss already under way for the key.
func (h *Handler) revalidate(st *state, rt *route.Route, params route.Params, r *http.Request, key, flightKey string) {
	if _, running := h.refreshing.LoadOrStore(flightKey, struct{}{}); running {
		return // one background refresh per key is enough
	}
	bg := r.Clone(context.WithoutCancel(r.Context()))
	go func() {
		defer h.refreshing.Delete(flightKey)
		_, _, _ = h.flights.Do(bg.Context(), flightKey, func(ctx context.Context) (*flight, error) {
			return h.fill(ctx, st, rt, params, bg, key, true)
		})
	}()
}

// outgoing builds the upstream request for the cached path: the client's
// end-to-end headers minus the conditional ones (the cache wants a full
// response to store, and answers conditionals itself), with X-Forwarded-*
// set as httputil.ProxyRequest.SetXForwarded does.
func (h *Handler) outgoing(ctx context.Context, r *http.Request, path, rawQuery string) *http.Request {
	u := *h.up
	u.Path = singleJoiningSlash(h.up.Path, path)
	u.RawPath = ""
	if path == r.URL.Path && r.URL.RawPath != "" {
		// Keep the client's encoding (a %2F stays one), as
		// httputil.ReverseProxy does on the pass-through path.
		u.RawPath = singleJoiningSlash(h.up.EscapedPath(), r.URL.RawPath)
	}
	u.RawQuery = rawQuery
	out := (&http.Request{
		Method:     http.MethodGet,
		URL:        &u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     r.Header.Clone(),
		Host:       h.up.Host,
	}).WithContext(ctx)
	if out.Header == nil {
		out.Header = http.Header{}
	}
	removeHopHeaders(out.Header)
	for _, k := range conditionalHeaders {
		out.Header.Del(k)
	}
	if ip, _, err := splitHostPort(r.RemoteAddr); err == nil {
		if prior := r.Header.Values("X-Forwarded-For"); len(prior) > 0 {
			ip = strings.Join(prior, ", ") + ", " + ip
		}
		out.Header.Set("X-Forwarded-For", ip)
	} else {
		out.Header.Del("X-Forwarded-For")
	}
	out.Header.Set("X-Forwarded-Host", r.Host)
	if r.TLS != nil {
		out.Header.Set("X-Forwarded-Proto", "https")
	} else {
		out.Header.Set("X-Forwarded-Proto", "http")
	}
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header.Set("User-Agent", "") // as ReverseProxy: do not add Go's
	}
	return out
}

// writeEntry answers from an entry: the stored header, Age when it came from
// the cache (RFC 9111 §5.1), Cache-Status, and a 304 when the client's
// conditional matches a stored 200 (RFC 9110 §13.2.2).
func (h *Handler) writeEntry(w http.ResponseWriter, r *http.Request, e *cache.Entry, st status, fromCache bool) {
	dst := w.Header()
	if e.Status == http.StatusOK && notModified(r, e.Header) {
		for _, k := range notModifiedHeaders {
			if v, ok := e.Header[k]; ok {
				dst[k] = v
			}
		}
		h.setCacheHeaders(dst, e, st, fromCache)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	for k, v := range e.Header {
		dst[k] = v
	}
	h.setCacheHeaders(dst, e, st, fromCache)
	if e.Status != http.StatusNoContent && e.Status != http.StatusNotModified {
		dst["Content-Length"] = []string{strconv.Itoa(len(e.Body))}
	}
	w.WriteHeader(e.Status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(e.Body)
	}
}

func (h *Handler) setCacheHeaders(dst http.Header, e *cache.Entry, st status, fromCache bool) {
	if fromCache {
		dst["Age"] = []string{strconv.FormatInt(int64(e.Age(h.now())/time.Second), 10)}
	}
	dst["Cache-Status"] = []string{appendCacheStatus(e.Header.Get("Cache-Status"), st.String())}
}

// acceptsEncoding guards against an upstream that compresses without
// saying Vary: a stored body in a content-coding the client did not accept
// is never served to it (RFC 9110 §12.5.3).
func acceptsEncoding(r *http.Request, h http.Header) bool {
	ce := h.Get("Content-Encoding")
	if ce == "" {
		return true
	}
	return cachekey.AcceptsEncoding(cachekey.NormalizeAcceptEncoding(r.Header.Get("Accept-Encoding")), ce)
}

func singleJoiningSlash(a, b string) string {
	aslash, bslash := strings.HasSuffix(a, "/"), strings.HasPrefix(b, "/")
	switch {
	case aslash && bslash:
		return a + b[1:]
	case !aslash && !bslash:
		return a + "/" + b
	}
	return a + b
}

var errNoHost = errors.New("no host")

func splitHostPort(addr string) (string, string, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", "", errNoHost
	}
	host := strings.TrimSuffix(strings.TrimPrefix(addr[:i], "["), "]")
	if host == "" {
		return "", "", errNoHost
	}
	return host, addr[i+1:], nil
}
