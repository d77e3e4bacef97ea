package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sidecache/sidecache/internal/batch"
	"github.com/sidecache/sidecache/internal/bulk"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/metrics"
	"github.com/sidecache/sidecache/internal/route"
)

// maxSplitIDs bounds the ids one list request may name; more pass through.
const maxSplitIDs = 1000

// errBulk marks a failed bulk call. Every waiter of that batch answers 502,
// whatever went wrong (status, timeout, malformed body): a batch never
// hands out a body it could not attribute to an id with certainty.
var errBulk = errors.New("bulk call failed")

func (h *Handler) newBatcher(rt *route.Route) *batch.Loader[*http.Request, *cache.Entry] {
	rm := h.m.Route(rt.Name)
	return batch.New(batch.Options{MaxSize: rt.Batch.MaxSize, MaxWait: rt.Batch.MaxWait, OnBatch: rm.BatchSize},
		func(ctx context.Context, r *http.Request, ids []string) (map[string]*cache.Entry, error) {
			return h.fetchBulk(ctx, rt, r, ids)
		})
}

// loadBatched answers one per-ID miss through the route's batcher.
func (h *Handler) loadBatched(ctx context.Context, b *batch.Loader[*http.Request, *cache.Entry], rt *route.Route, params route.Params, r *http.Request) (*flight, error) {
	id := params.Get(rt.Batch.IDParam)
	e, found, err := b.Load(ctx, forwardGroup(r, rt.Key.Headers), r, id)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, &upstreamErr{code: http.StatusBadGateway, err: err}
	}
	if !found {
		e = notFoundEntry(h.now())
	}
	return &flight{e: e, stored: e.TTL > 0, shareable: !private(e.Header), batched: true}, nil
}

// fetchBulk makes the one upstream call of a batch and turns its JSON
// array into one entry per requested id, stored exactly as a per-ID fetch
// would have been: the route's key, TTL and tags. Ids absent from the answer
// become 404s (negative-cached under negative_ttl).
func (h *Handler) fetchBulk(ctx context.Context, rt *route.Route, r *http.Request, ids []string) (map[string]*cache.Entry, error) {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	path, rawQuery, _ := strings.Cut(bulk.URL(rt.Batch.Path, rt.Batch.Param, ids), "?")
	out := h.outgoing(ctx, r, path, rawQuery)
	// The answer is split here, so let the transport negotiate and undo
	// compression: stored elements are identity-coded.
	out.Header.Del("Accept-Encoding")
	out.Header.Del("Accept")
	out.Header.Set("Accept", "application/json")
	rm := h.m.Route(rt.Name)
	t0 := h.now()
	resp, err := h.transport.RoundTrip(out)
	if err != nil {
		rm.Upstream(0, h.now().Sub(t0))
		return nil, fmt.Errorf("%w: %w", errBulk, err)
	}
	defer resp.Body.Close()
	limit := min(h.maxBody*int64(len(ids)), 256<<20)
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	rm.Upstream(resp.StatusCode, h.now().Sub(t0))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: read: %w", errBulk, err)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, fmt.Errorf("%w: status %d", errBulk, resp.StatusCode)
	case int64(len(body)) > limit:
		return nil, fmt.Errorf("%w: answer over %d bytes", errBulk, limit)
	}
	parts, err := bulk.Split(body, rt.Batch.IDField)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBulk, err)
	}
	now := t0 // the request time: see store
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		ct = "application/json"
	}
	// A private answer stays private per id: not stored, not handed to
	// collapsed waiters (see usable), and the clients are told so
	// (RFC 9111 §5.2.2.7). A bulk answer that varies on request headers is
	// treated the same way: it was fetched with the opener's headers, and
	// the batch's other requests may differ in ones the grouping ignores.
	names, star := cachekey.ParseVary(resp.Header)
	shareable := !private(resp.Header) && len(names) == 0 && !star
	storable := shareable && !cacheControlHas(resp.Header, "no-cache")
	var cc []string
	if !shareable {
		cc = []string{"private"}
		if cacheControlHas(resp.Header, "private") || cacheControlHas(resp.Header, "no-store") {
			cc = slices.Clone(resp.Header.Values("Cache-Control"))
		}
	}
	res := make(map[string]*cache.Entry, len(ids))
	for _, id := range ids {
		params := route.Params{{Key: rt.Batch.IDParam, Value: id}}
		var e *cache.Entry
		if elem, ok := parts[id]; ok {
			e = &cache.Entry{Status: http.StatusOK, Header: http.Header{"Content-Type": {ct}}, Body: elem, StoredAt: now,
				TTL: rt.TTL, StaleWhileRevalidate: rt.StaleWhileRevalidate, StaleIfError: rt.StaleIfError}
		} else {
			e = notFoundEntry(now)
			e.TTL = rt.NegativeTTL
		}
		if cc != nil {
			e.Header["Cache-Control"] = cc
		}
		e.Tags = entryTags(rt, params)
		// An element over max_body_bytes is answered but, like any such
		// response, not kept.
		if e.TTL > 0 && storable && int64(len(e.Body)) <= h.maxBody && !h.tombs.Stale(e, h.now()) {
			req := perIDRequest(r, rt, id)
			if err := h.cache.Set(ctx, cachekey.Build(req, &rt.Key), e); err != nil {
				h.log.Debug("cache set", "route", rt.Name, "id", id, "err", err)
			}
		} else {
			e.TTL = 0
		}
		res[id] = e
	}
	return res, nil
}

func notFoundEntry(now time.Time) *cache.Entry {
	return &cache.Entry{Status: http.StatusNotFound, StoredAt: now,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"error":"not found"}`)}
}

// perIDRequest is the request a client would have sent for one id of a
// batch route: same host and headers, the route's path with the id in it.
func perIDRequest(r *http.Request, rt *route.Route, id string) *http.Request {
	r2 := new(http.Request)
	*r2 = *r
	r2.Method = http.MethodGet
	u := *r.URL
	u.Path, u.RawPath, u.RawQuery = fillPattern(rt.Pattern, rt.Batch.IDParam, id), "", ""
	r2.URL = &u
	return r2
}

// fillPattern puts value in place of {param} or {param:regexp} in a chi
// pattern.
func fillPattern(pattern, param, value string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(pattern, '{')
		if i < 0 {
			b.WriteString(pattern)
			return b.String()
		}
		j := strings.IndexByte(pattern[i:], '}')
		if j < 0 {
			b.WriteString(pattern)
			return b.String()
		}
		name, _, _ := strings.Cut(pattern[i+1:i+j], ":")
		b.WriteString(pattern[:i])
		if name == param {
			b.WriteString(value) // raw: URL.Path is the decoded path
		} else {
			b.WriteString(pattern[i : i+j+1])
		}
		pattern = pattern[i+j+1:]
	}
}

// groupIgnored are request headers that do not change what the upstream
// answers for an id, so requests differing only in them may share a batch.
// Every other end-to-end header — Authorization, Cookie, Accept-Language,
// tenant headers — must agree (SPEC "Batching").
var groupIgnored = map[string]bool{
	"Accept":          true, // the bulk call always asks for application/json
	"Accept-Encoding": true, "User-Agent": true, "Referer": true, "Cache-Control": true, "Pragma": true,
	"X-Forwarded-For": true, "X-Forwarded-Host": true, "X-Forwarded-Proto": true, "Forwarded": true, "Via": true,
	"X-Request-Id": true, "X-Real-Ip": true, "Traceparent": true, "Tracestate": true, "Baggage": true,
	"X-Vegeta-Seq":   true, // the load generator's per-request counter
	"Content-Length": true,
}

// ignoredInGroup adds to groupIgnored the hop-by-hop and conditional
// fields, which never reach the bulk call (see outgoing).
func ignoredInGroup(k string) bool {
	return groupIgnored[k] || slices.Contains(hopHeaders[:], k) || slices.Contains(conditionalHeaders[:], k) ||
		strings.HasPrefix(k, "X-B3-")
}

// forwardGroup is the batch group of a request: its host and every header
// that could change the answer, in a canonical order. A header the route
// keys on changes the answer by the operator's say-so, even one that
// groupIgnored lists: the batch stores every id under the opener's key, so
// a waiter differing in it would get, and miss, another variant.
func forwardGroup(r *http.Request, keyHeaders []string) string {
	names := make([]string, 0, len(r.Header))
	for k := range r.Header {
		if !ignoredInGroup(k) || listed(keyHeaders, k) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(strings.ToLower(r.Host))
	for _, k := range names {
		b.WriteByte('\n')
		b.WriteString(k)
		for _, v := range r.Header[k] {
			b.WriteByte('\x00')
			b.WriteString(v)
		}
	}
	return b.String()
}

// serveSplit answers a list request (GET /users?ids=3,1,2) per id from the
// per-ID route's cache; only the missing ids go upstream, through the
// batcher, and the array is reassembled in the requested order. Duplicate
// ids appear once (first position) and unknown ids are left out, as an
// upstream answering with a SQL `IN (…)` would.
func (h *Handler) serveSplit(w http.ResponseWriter, r *http.Request, st *state, rt *route.Route, rm *metrics.RouteMetrics, start time.Time) {
	target := rt.Split.Route
	if reason := bypassReason(r, target.Key.Headers); reason != "" {
		h.passThrough(w, r, rm, start, status{fwd: "bypass", detail: reason}, nil)
		return
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil || len(q) != 1 || len(q[rt.Split.Param]) != 1 {
		// Other parameters may change the answer in ways the per-ID
		// route cannot reproduce: let the upstream answer.
		h.passThrough(w, r, rm, start, status{fwd: "bypass", detail: "split-query"}, nil)
		return
	}
	ids, err := bulk.ParseIDs(q.Get(rt.Split.Param), maxSplitIDs)
	if err != nil || len(ids) == 0 {
		h.passThrough(w, r, rm, start, status{fwd: "bypass", detail: "split-ids"}, nil)
		return
	}
	ctx := r.Context()
	type slot struct {
		e   *cache.Entry
		err error
	}
	slots := make(map[string]*slot, len(ids))
	var uniq []string
	var reqs []*http.Request
	var keys []string
	for _, id := range ids {
		if slots[id] == nil {
			slots[id] = &slot{}
			req := perIDRequest(r, target, id)
			uniq, reqs, keys = append(uniq, id), append(reqs, req), append(keys, cachekey.Build(req, &target.Key))
		}
	}
	// Every id's L1 entry, then the L2 misses in one round trip.
	found, tiers, _ := h.cache.LookupMany(ctx, keys)
	var wg sync.WaitGroup
	hits, misses := 0, 0
	for i, id := range uniq {
		s, req, key := slots[id], reqs[i], keys[i]
		e, _, _, _ := h.resolve(ctx, h.cache.Lookup, key, req, found[i], tiers[i])
		if h.servable(e, req) {
			s.e = e
			hits++
			continue
		}
		misses++
		params := route.Params{{Key: target.Batch.IDParam, Value: id}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, leader, err := h.flights.Do(ctx, key, func(fctx context.Context) (*flight, error) {
				// refresh: both tiers were just read for this id.
				return h.fill(fctx, st, target, params, req, key, true)
			})
			if err == nil && !leader && !h.usable(f, req, key) {
				// Another client's private answer: load this one's own.
				f, err = h.loadBatched(ctx, st.batchers[target], target, params, req)
			}
			if err == nil && f.e.Status >= 500 {
				err = &upstreamErr{code: http.StatusBadGateway, err: fmt.Errorf("split: id status %d", f.e.Status)}
			}
			s.e, s.err = f.entry(), err
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	elems := make([][]byte, 0, len(slots))
	ct, priv := "", false
	for _, id := range ids {
		s := slots[id]
		if s == nil {
			continue // a duplicate already placed
		}
		delete(slots, id)
		if s.err != nil {
			writeUpstreamError(w, classify(s.err), status{fwd: "miss", detail: "split"})
			rm.Request(metrics.Miss, h.now().Sub(start))
			return
		}
		if s.e.Status != http.StatusOK {
			continue
		}
		if ct == "" {
			ct = s.e.Header.Get("Content-Type")
		}
		priv = priv || private(s.e.Header)
		elems = append(elems, s.e.Body)
	}
	if ct == "" {
		ct = "application/json"
	}
	body := bulk.Join(elems)
	stt := status{hit: misses == 0, detail: `"split hits=` + strconv.Itoa(hits) + ` misses=` + strconv.Itoa(misses) + `"`}
	result := metrics.Hit
	if misses > 0 {
		stt.fwd = "miss"
		result = metrics.Miss
	}
	hd := w.Header()
	hd.Set("Content-Type", ct)
	if priv {
		hd.Set("Cache-Control", "private")
	}
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	hd.Set("Cache-Status", stt.String())
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
	rm.Request(result, h.now().Sub(start))
}

func (f *flight) entry() *cache.Entry {
	if f == nil {
		return nil
	}
	return f.e
}
