package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/sidecache/sidecache/internal/batch"
	"github.com/sidecache/sidecache/internal/bulkanswer"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/coalesce"
	"github.com/sidecache/sidecache/internal/entryblock"
	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/largebody"
	"github.com/sidecache/sidecache/internal/redisbudget"
	"github.com/sidecache/sidecache/internal/upfail"
)

// flight is what one fill hands to the request that ran it and to every
// request collapsed onto it.
type flight struct {
	c       candidate // the answer: found in a tier (c.tier set) or fetched
	stored  bool      // a tier accepted the fetched answer
	batched bool
	// revalidated: c is a stored entry the upstream confirmed (304).
	// (The flags sit together: a lead holds a flight, and every 8 bytes
	// of it may take the lead to a larger size class.)
	revalidated bool
	// unstorable: the fetched answer may not be stored, for what it is
	// (admit refused it: private, no-store, Set-Cookie, Vary: *, an
	// uncacheable status, too large...), not for a tier's failure or a
	// write's invalidation on its way: the cluster lease's holder marks
	// the key hit-for-pass (leasePass).
	unstorable bool
	// foreign: a batched answer only the request whose headers made the
	// bulk call may have (private, or varying per request), and that
	// request was another: this one fetches its own (join, split's
	// fetchMissing), as a collapsed waiter does.
	foreign bool
	// large is set instead of c when the body is over max_body_bytes: the
	// live response, streamed by one client (internal/largebody).
	large *largebody.Body
	// stale is a stale copy the fill found, for stale-if-error; nil:
	// none. A pointer, as only a fill that found one has it: a flight
	// is made per L2 hit and held by every batched miss's lead, and the
	// candidate in place took a flight from 128 bytes to 192.
	stale *candidate
	// upstream is the time the fill spent on its upstream call.
	upstream time.Duration
	// link is the span waiters link to (trace.go); nil: none. A pointer,
	// as only traced fills have one: a batched flight's points into its
	// bulkCall, and the lead holding the flight stays in a smaller size
	// class.
	link *spanLink
	// reqID is the X-Request-Id the sidecar sent on the upstream call
	// that produced the answer, for the access log.
	reqID string
}

// need is the freshness a waiter asks of the flight's answer: a fetched
// answer is as fresh as it gets; one found in a tier may be stale within
// stale-while-revalidate.
func (f *flight) need() need {
	if f.c.tier == "" {
		return needAny
	}
	return needRevalidate
}

// fill runs once per flight, and is the only code that reads the shared
// tier, takes the cluster lease, calls the upstream or the batcher. It
// re-checks both tiers first (another flight may have just filled them, and
// L2 was not read before the flight, so that a herd of misses costs one L2
// read, not one each); L1 only when a flight may have filled it since the
// request read it (fillCached).
func (x *exchange) fill(ctx context.Context) (*flight, error) {
	f, stale, readFailed := x.fillCached(ctx, nil)
	if f != nil {
		return f, nil
	}
	return x.fillMiss(ctx, stale, readFailed)
}

// lead is what the flight of a batched miss needs until the batch
// answers it (fillFirst): the flight to finish, the stale copy and the
// answer (with the stale copy the fill found, f.stale), the id's result
// in its batch, and, of the request's exchange, only what the answer is
// made with (batchedFlight, missed). One allocation, where a closure for
// each hand-over (to coalesce, to the batch), the answer and the result
// were one each. It holds no copy of the exchange: the batch needs one
// (the bulk call's headers) only from the request that opens it, and
// copies it then (batch.Loader.LoadTo's arg); a copy in every lead was
// half its bytes.
//
// It holds the flight itself too (coalesce.Group.DoThenIn): join makes
// the lead when it leads the flight of a batched miss, before it knows
// whether the tiers answer, so an L2 hit on a batch route costs a lead
// where it cost a Flight, and a batched miss one allocation fewer.
type lead struct {
	fl coalesce.Flight[*flight]
	h  *Handler
	// base is the stored entry the fill would have revalidated, for
	// missed's must-revalidate rule (mustRevalidateError).
	base *cache.Entry
	// req is the request that leads the flight: the batch's answer is
	// its own only if the bulk call carried its header (MadeFor), and an
	// isolation retry of its id is made with it (RetryArg, foreign.go).
	req  *http.Request
	f    flight
	slot batch.Slot[*bulkanswer.Answer]
	// budget is the leader's Redis budget, which fl's context carries
	// (join), unless the request had one already.
	budget redisbudget.Budget
}

// leaderFlight is what any other leader allocates (join): its Flight, its
// Redis budget, which the Flight's context carries, and the answer when a
// tier has it (fillFirst). One allocation, where an L2 hit made three: the
// Flight, a context for the budget (redisbudget.New) and the answer. A
// miss's answer is made by its fetch; f is then unused.
type leaderFlight struct {
	fl     coalesce.Flight[*flight]
	budget redisbudget.Budget
	f      flight
}

// fillFirst is the flight of join, run only by the request that leads it
// (coalesce.DoThen), on the request's own exchange: fill's tier read runs
// on the leader's goroutine, and only a miss goes on to the upstream on a
// goroutine of its own, with a copy of the exchange (detach), which the
// leader may stop waiting for. An L2 hit thus costs no goroutine, no
// stack grown to the Redis client's depth and no hand-over. A miss of a
// batched route needs no goroutine either: it joins a batch, whose
// goroutine finishes the flight (lead.Loaded), and copies the exchange
// only when it opens the batch. With tracing on, the whole fill runs in
// its span on the flight's goroutine, as before. A request that joins a
// flight in progress copies nothing, and neither does a hit (the copy of
// an exchange was a fifth of an L2 hit's allocated bytes: BenchmarkL2Hit).
//
// m, when not nil, is the lead whose Flight is fl (join made it, as the
// request may be a batched miss). hit, when not nil, is the flight a
// tier's answer is written to: the one in the allocation that holds fl
// (lead.f, leaderFlight.f), so that an L2 hit allocates no answer of its
// own. A batched miss that takes the cluster
// lease first (leases) goes on as any other miss does, on a goroutine:
// the lease may mean waiting for another replica's fill, which the
// leader must be free to stop waiting for.
func (x *exchange) fillFirst(ctx context.Context, fl *coalesce.Flight[*flight], m *lead, hit *flight) (*flight, coalesce.Next[*flight], error) {
	if x.h.tr != nil {
		x.relayInterim()
		return nil, coalesce.Next[*flight]{Then: x.detach().fillTraced}, nil // the request's own exchange stays on its stack
	}
	base := x.base
	f, stale, readFailed := x.fillCached(ctx, hit)
	if f != nil {
		return f, coalesce.Next[*flight]{}, nil
	}
	defer func() { x.base = base }() // the request's own exchange as it was
	if m != nil && &m.fl == fl && !x.leases(readFailed) {
		x.loadBatchedTo(ctx, m, stale) // batch.go
		return nil, coalesce.Next[*flight]{Handed: true}, nil
	}
	x.relayInterim()
	fx := x.detach() // with the base fillCached chose, and the relay
	return nil, coalesce.Next[*flight]{Then: func(ctx context.Context) (*flight, error) { return fx.fillMiss(ctx, stale, readFailed) }}, nil
}

// fillCached is fill's first step: the tiers' read, bounded by each
// tier's own timeout. It returns the flight when a tier answers,
// otherwise nil and the stale copy it found, for the rest of the fill
// (fillMiss: the lease and the upstream). readFailed reports that the
// read found nothing because a tier failed (Redis down or slow, not a
// miss): the fill then takes no lease (leases).
//
// A leader whose request found nothing in L1 under its key reads L2 only
// while no flight has finished since that read (emptyAt): only a flight
// fills L1 for a cached request, and one that filled it for this key
// finished after the read, or this request would have joined it. So a
// batched or L2-served miss costs one L1 read, not two. (A list request's
// bulk call, or a forced refresh, may store the key meanwhile: the leader
// then fetches it once more, as it would had the store come a moment
// after its second read.)
//
// The flight a tier answers is written to hit, when not nil (fillFirst),
// else allocated.
func (x *exchange) fillCached(ctx context.Context, hit *flight) (f *flight, stale candidate, readFailed bool) {
	if !x.refresh && !x.own {
		var c candidate
		var err error
		if x.emptyAt != 0 && x.h.flights.Finished()+1 == x.emptyAt {
			var e *cache.Entry
			var tier cache.Tier
			e, tier, err = x.h.cache.LookupShared(ctx, x.key)
			c = x.resolve(ctx, x.h.cache.Lookup, e, tier)
		} else {
			c, err = x.lookupErr(ctx, false)
		}
		readFailed = err != nil
		if x.answers(c, needRevalidate) {
			if hit == nil {
				hit = new(flight)
			}
			*hit = flight{c: c}
			return hit, stale, readFailed
		}
		if x.answers(c, needIfError) {
			stale = c
		}
		x.base = x.validatable(c)
	}
	return nil, stale, readFailed
}

// fillMiss is fill after the tiers missed: the upstream (or the lease, or
// the batcher), with stale kept for the waiters' stale-if-error.
func (x *exchange) fillMiss(ctx context.Context, stale candidate, readFailed bool) (*flight, error) {
	f, err := x.fillUpstream(ctx, stale, readFailed)
	return x.missed(f, err, stale)
}

// missed is the flight of a fill that missed the tiers, from what the
// upstream or the batcher gave.
func (x *exchange) missed(f *flight, err error, stale candidate) (*flight, error) {
	if err != nil {
		err = x.mustRevalidateError(err) // revalidate.go
	}
	if f == nil {
		f = &flight{} // keeps the stale copy reachable for the waiters
	}
	f.stale = staleRef(stale)
	return f, err
}

// staleRef is flight.stale for the stale copy a fill found (c.e nil:
// none).
func staleRef(c candidate) *candidate {
	if c.e == nil {
		return nil
	}
	held := c // a copy made here, so that no call allocates without one
	return &held
}

// batched reports whether the request's miss is loaded through the
// route's batcher: a batch route's request with no query of its own.
func (x *exchange) batched() bool {
	return x.rs.batcher != nil && x.upstreamQuery() == ""
}

func (x *exchange) fillUpstream(ctx context.Context, stale candidate, readFailed bool) (*flight, error) {
	if x.batched() {
		return x.fillBatched(ctx, stale, readFailed) // lease.go
	}
	// One deadline for waiting on another replica's lease and fetching
	// after it: a client gets its 504 at upstream.timeout, not twice that.
	ctx, cancel := context.WithTimeout(ctx, x.st.timeout)
	defer cancel()
	if !x.leases(readFailed) {
		return x.fetchTraced(ctx)
	}
	f, release := x.clusterLease(ctx, stale) // lease.go
	if f != nil {
		return f, nil
	}
	return x.fetchReleasing(ctx, release, x.fetchTraced)
}

// lookup reads the cache (L1 only when local), following a variants marker
// to the variant this request selects (RFC 9111 §4.1). A tier error is a
// miss: the request goes on without that tier.
func (x *exchange) lookup(ctx context.Context, local bool) candidate {
	c, _ := x.lookupErr(ctx, local)
	return c
}

// lookupErr is lookup with the error of its first read: a tier that
// failed where nothing answered (fillCached).
func (x *exchange) lookupErr(ctx context.Context, local bool) (candidate, error) {
	get := x.h.cache.Lookup
	if local {
		get = x.h.cache.LookupLocal
	}
	e, tier, err := get(ctx, x.key)
	return x.resolve(ctx, get, e, tier), err
}

// resolve finishes a lookup whose first read gave e: it follows a variants
// marker with get, and finds nothing in an entry x's route would not have
// stored so (carried). The split path reads many keys at once and
// resolves each.
func (x *exchange) resolve(ctx context.Context, get func(context.Context, string) (*cache.Entry, cache.Tier, error), e *cache.Entry, tier cache.Tier) candidate {
	c := x.follow(ctx, get, e, tier)
	if c.e != nil && !x.carried(c.e) {
		c.e, c.tier = nil, ""
	}
	return c
}

// follow is resolve's read of a variants marker: the variant the request
// selects, read with get.
func (x *exchange) follow(ctx context.Context, get func(context.Context, string) (*cache.Entry, cache.Tier, error), e *cache.Entry, tier cache.Tier) candidate {
	c := candidate{e: e, tier: tier}
	if e != nil && e.IsVariants() {
		c.vary = e.Variants
		c.vkey = x.variantKey(c.vary)
		if len(c.vkey) > x.h.maxKey {
			// No variant is stored under a key over max_key_bytes (keep),
			// so there is nothing to read, and no 60 KB key to send.
			c.e, c.tier = nil, ""
			return c
		}
		c.e, c.tier, _ = get(ctx, c.vkey)
		if c.e != nil && c.e.IsVariants() {
			c.e = nil // a marker where a response belongs: a miss
		}
		if c.e == nil && slices.Contains(c.vary, "Accept-Encoding") {
			// No variant in the coding chosen for this client: one in
			// identity answers it as well (the origin answered some
			// client uncompressed, under its compression threshold).
			if ikey := x.variantKeyIn(c.vary, cachekey.Identity); ikey != c.vkey {
				if e, tier, _ := get(ctx, ikey); e != nil && !e.IsVariants() {
					c.e, c.tier, c.vkey = e, tier, ikey
				}
			}
		}
	}
	return c
}

// fetch makes one upstream GET for the request and keeps the answer if
// admit lets it. A body over max_body_bytes is not read twice: the flight
// hands the live response on, to be streamed (internal/largebody).
func (x *exchange) fetch(ctx context.Context) (*flight, error) {
	// The fetch's own context ends with ctx's deadline until the answer
	// turns out too large to keep; it is then streamed like a
	// pass-through, which the whole call's deadline does not cut once it
	// has started, and the wait for each of its bytes does: the upstream
	// pool bounds it (lean's armBody, the Transport's idlebody.Wrap), so a
	// body that stalls halfway ends the stream (streamLarge aborts the
	// client's connection) rather than holding it for good.
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	out := x.outgoing(fctx, x.r.URL.Path, x.upstreamQuery())
	x.addConditional(out)
	t0 := x.h.now()
	x.calls++
	resp, err := x.sendFetch(out)
	if err == nil && resp.StatusCode == http.StatusSwitchingProtocols {
		// A GET that did not ask to upgrade cannot be switched (RFC 9110
		// §15.2.2); relaying it would leave the client hanging.
		resp.Body.Close()
		err = &upfail.Error{Code: http.StatusBadGateway, Err: errors.New("unrequested 101 Switching Protocols")}
	}
	if err == nil && resp.StatusCode < 100 {
		// Three digits but no status (RFC 9110 §15): nothing to store or
		// relay (a ResponseWriter panics on it).
		resp.Body.Close()
		err = &upfail.Error{Code: http.StatusBadGateway, Err: fmt.Errorf("upstream status %d out of range", resp.StatusCode)}
	}
	if err != nil {
		cancel()
		x.rs.m.Upstream(0, x.h.now().Sub(t0))
		return nil, upfail.Classify(upfail.DeadlineFirst(ctx, err))
	}
	x.sent = out.Header
	if names, _ := cachekey.ParseVary(resp.Header); !x.retried && x.sentWithout(names) {
		// The answer varies on a header the request carried and this
		// fetch did not send: it is another variant than the one the key
		// names, large or not. Forward the header from now on (another
		// request may just have taught it) and ask once more.
		x.rs.fwd.learnVary(x.r, names)
		if !x.rs.fwd.withheld(x.r, names) {
			resp.Body.Close()
			cancel()
			x.rs.m.Upstream(resp.StatusCode, x.h.now().Sub(t0))
			x.retried = true
			if err := x.overBudget("vary: answer varies on a header not sent"); err != nil {
				// Another variant than this request's, and no call
				// left to ask for its own: an error, never that body.
				return nil, err
			}
			return x.fetch(ctx)
		}
	}
	// An answer whose Content-Length is over max_body_bytes cannot be kept
	// (RFC 9112 §6.3: that many bytes or a broken answer), so it streams at
	// once, as NGINX's proxy_buffering does past its buffers: reading its
	// first max_body_bytes first would hold them in memory and under the
	// whole call's deadline for nothing, and a slow start would end in a
	// 504 for an answer that was flowing.
	var body []byte
	large := resp.ContentLength > x.h.maxBody
	if !large {
		body, err = readAll(resp.Body, resp.ContentLength, x.h.maxBody)
		large = int64(len(body)) > x.h.maxBody
	}
	took := x.h.now().Sub(t0)
	x.rs.m.Upstream(resp.StatusCode, took)
	if err != nil {
		resp.Body.Close()
		cancel()
		return nil, upfail.Classify(upfail.DeadlineFirst(ctx, err))
	}
	if large && stop() {
		// Remember for a while that this variant streams through
		// (Varnish's hit-for-pass), so its next requests go straight to
		// pass-through; other variants of the URL are still cached.
		x.passVariant(resp.Header, x.h.now().Add(x.passFor()))
		// Only this request's client may stream it (join): if that client
		// has left, nobody will, so the upstream goes at once.
		l := largebody.New(x.r.Context(), resp, body, cancel)
		return &flight{large: l, upstream: took, reqID: out.Header.Get("X-Request-Id")}, nil
	}
	resp.Body.Close()
	cancel()
	if resp.StatusCode == http.StatusNotModified && x.base.e != nil {
		f, err := x.refreshed(ctx, resp.Header, t0, took)
		if f != nil {
			f.reqID = out.Header.Get("X-Request-Id")
		}
		return f, err
	}
	if large {
		return nil, upfail.Classify(ctx.Err()) // the deadline won the race with stop
	}
	f := x.keep(ctx, resp.StatusCode, resp.Header, body, t0)
	f.upstream, f.reqID = took, out.Header.Get("X-Request-Id")
	return f, nil
}

// keep builds the entry for a fetched answer and stores it in every tier if
// admit lets it. requested is when the request left for the upstream: the
// entry's age counts from then (RFC 9111 §4.2.3), and an invalidation after
// it means the answer may predate the write.
func (x *exchange) keep(ctx context.Context, code int, header http.Header, body []byte, requested time.Time) *flight {
	e := entryblock.New(x.rs.routeTag, x.rs.rt.Tags, x.params.list())
	e.Status, e.Header, e.Body, e.StoredAt = code, httpcache.StoredHeader(header), body, requested
	f := x.keepAs(ctx, e, header, nil)
	return &f
}

// keepAs is keep with the entry already made (entryblock.New; its status,
// header, body and request time set): e.Header, which tagEntry may strip;
// header, the answer's, is only read (before the strip, for the tags), and
// may be e.Header itself. hd, if not nil, is what admit reads of header
// alone, worked out already (a bulk answer's, for each of its elements).
// It returns the flight by value: a bulk answer's elements take three
// fields of it.
func (x *exchange) keepAs(ctx context.Context, e *cache.Entry, header http.Header, hd *heard) flight {
	tagged := x.tagEntry(e, header) // URI tag, upstream surrogate keys (origintags.go)
	a := x.admit(e, header, hd)
	// The fields a qualified private or no-cache names go before the
	// flight is shared, stored or not: its waiters are other clients.
	a.Withhold(e)
	e.InitialAge = a.Age // reported as Age even when not stored (RFC 9111 §5.1)
	a.Store = a.Store && tagged
	f := flight{c: candidate{e: e, vary: a.Vary, private: !a.Shareable}, unstorable: !a.Store && !a.Invalidated}
	coding, known := entryCoding(e)
	if known && coding != cachekey.Identity {
		x.rs.fwd.rules.NoteCoding(coding) // clients accepting it look there first
	}
	key := x.key
	if len(a.Vary) > 0 {
		// The variant is keyed on the coding it is in, not on what the
		// client asked: an identity answer serves every client.
		key = x.variantKeyIn(a.Vary, coding)
		f.c.vkey = key
		a.Store = a.Store && (known || !slices.Contains(a.Vary, "Accept-Encoding"))
	}
	if !a.Store || len(key) > x.h.maxKey {
		// max_key_bytes bounds variant keys too: a 60 KB Accept-Language
		// must not become a 60 KB key in L1 and Redis.
		return f
	}
	a.Apply(e)
	if x.sets != nil {
		// An element of a bulk answer: written with the others
		// (storeElements), which takes stored back if the write fails.
		if len(a.Vary) > 0 {
			x.sets.Add(x.key, e.Marker(a.Vary), -1)
		}
		x.sets.Add(key, e, x.sets.Cur)
		f.stored = true
		return f
	}
	if len(a.Vary) > 0 {
		_ = x.h.cache.Set(ctx, x.key, e.Marker(a.Vary))
	}
	if err := x.h.cache.Set(ctx, key, e); err != nil {
		x.h.log.Debug("cache set", "key", key, "err", err)
		return f
	}
	f.stored = true
	return f
}
