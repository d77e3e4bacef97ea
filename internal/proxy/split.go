package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/sidecache/sidecache/internal/bulk"
	"github.com/sidecache/sidecache/internal/bulkanswer"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/redisbudget"
	"github.com/sidecache/sidecache/internal/route"
	"github.com/sidecache/sidecache/internal/splitpart"
	"github.com/sidecache/sidecache/internal/upfail"
)

// split answers a list request (GET /users?ids=3,1,2) per id from the
// per-ID route's cache; only the missing ids go upstream, through the
// batcher, and the array is reassembled in the requested order. Unknown
// ids are left out, as an upstream answering with a SQL `IN (…)` would; a
// list that asks for an id twice, or spells one otherwise than the cache
// stores it, passes through (splitpart.AsAsked). An id the target route's
// pattern refuses (x7 for /users/{id:[0-9]+}) is left out the same way,
// without a lookup or a fetch: no client could have asked the batch route
// for it, so it never joins a batch.
//
// The list is the client's: an empty or malformed one, or one of more than
// split.max_ids distinct ids, is a 400 (RFC 9110 §15.5.1) that names the
// fault, never a pass-through that would make the upstream do the work the
// bound is there to refuse.
func (x *exchange) split() {
	sp := x.rs.rt.Split
	target := x.st.routes[sp.Route]
	if reason := httpcache.BypassReason(x.r, sp.Route.Key.Headers); reason != "" {
		x.pass(outBypass, reason)
		return
	}
	q, err := url.ParseQuery(x.r.URL.RawQuery)
	if err != nil || len(q) != 1 || len(q[sp.Param]) != 1 {
		// Other parameters may change the answer in ways the per-ID
		// route cannot reproduce: let the upstream answer, but not for
		// more ids than the route takes.
		if vs := q[sp.Param]; len(vs) > 0 {
			if _, err := bulk.ParseIDs(strings.Join(vs, ","), sp.MaxIDs); errors.Is(err, bulk.ErrTooManyIDs) {
				x.badIDList(err)
				return
			}
		}
		x.pass(outBypass, "split-query")
		return
	}
	list := q.Get(sp.Param)
	ids, err := bulk.ParseIDs(list, sp.MaxIDs)
	if err != nil { // always a bulk.ErrIDList: the client's list
		x.badIDList(err)
		return
	}
	if reason := splitpart.AsAsked(list, ids); reason != "" {
		x.pass(outBypass, reason)
		return
	}
	// One Redis budget for the whole list (internal/redisbudget): its
	// read of every id and the fetches of the ids that missed.
	x.r = x.r.WithContext(redisbudget.New(x.r.Context()))
	parts := x.perID(target, ids)
	hits := x.readAll(parts)
	if parts.Bytes() > x.h.maxBody {
		// Its cached elements alone are over the bound: the upstream's
		// list answers, streamed, without fetching the rest (internal/bulkmem).
		x.passListTooLarge(target)
		return
	}
	x.fetchMissing(parts)
	if x.r.Context().Err() != nil {
		return
	}
	x.joinParts(ids, parts, hits)
}

// part is one distinct id of a list request (internal/splitpart), with
// its per-ID exchange.
type (
	part      = splitpart.Part[*exchange]
	listParts = splitpart.Parts[*exchange]
)

// perID makes one per-ID exchange of the target route for each id (all
// distinct: splitpart.AsAsked) that the target route would take.
func (x *exchange) perID(target *routeState, ids []string) listParts {
	parts := make(listParts, len(ids))
	proto := x.detach()
	proto.rs = target
	// One account for the whole list: its ids may cost the upstream at
	// most batch.ListBudget(n, max_size) calls, whatever it answers (issue 20
	// item 4).
	proto.list = target.batcher.Requester(len(ids))
	var scratch route.Params
	for _, id := range ids {
		var ok bool
		if ok, scratch = x.routable(target.rt, id, scratch[:0]); ok {
			parts[id] = &part{X: proto.forID(id)}
		}
	}
	return parts
}

// routable reports whether the request a client would send for id is
// served by rt with id as its param: the route table, first match wins,
// sends that path to rt, and rt's pattern (a {id:[0-9]+} regexp, no "/" in
// an unconstrained param) takes id whole.
func (x *exchange) routable(rt *route.Route, id string, scratch route.Params) (bool, route.Params) {
	got, ps, ok := x.st.table.MatchAppend(scratch, http.MethodGet, rt.PathFor(rt.Batch.IDParam, id))
	return ok && got == rt && ps.Get(rt.Batch.IDParam) == id, ps
}

// badIDList answers 400 to a list request whose id list is at fault.
func (x *exchange) badIDList(err error) {
	sp := x.rs.rt.Split
	// The message names the fault, never the client's ids.
	x.badRequest("split-ids", fmt.Sprintf("%s in ?%s= (comma-separated, at most %d distinct ids)\n",
		strings.TrimPrefix(err.Error(), "bulk: "), sp.Param, sp.MaxIDs))
}

// readAll reads every id's entry — L1, then the L2 misses in one round
// trip — and keeps those that answer; it returns how many did. A stale
// entry answers as it would a request for its id alone (cached): within
// stale-while-revalidate at once, with one background refresh; within
// stale-if-error it is held for the id's fetch failing (fetchMissing).
func (x *exchange) readAll(parts listParts) int {
	ctx := x.r.Context()
	keys := make([]string, 0, len(parts))
	order := make([]*part, 0, len(parts))
	for _, p := range parts {
		keys, order = append(keys, p.X.key), append(order, p)
	}
	found, tiers, _ := x.h.cache.LookupMany(ctx, keys)
	hits := 0
	for i, p := range order {
		switch c := p.X.resolve(ctx, x.h.cache.Lookup, found[i], tiers[i]); {
		case p.X.answers(c, needFresh):
			p.E = c.e
			hits++
		case p.X.answers(c, needRevalidate):
			p.X.revalidate(c)
			p.E, p.Stale = c.e, true
			hits++
		case p.X.answers(c, needIfError):
			p.Held = c.e
		}
	}
	return hits
}

// fetchMissing loads every id not read from the cache through the target
// route's batcher, on the list's account.
//
// Never through the key's flight, which one-id requests for the key join:
// a list's id may fail for the list alone (its call budget spent isolating
// its bad ids, issue 20 item 4), and a flight hands its failure to every
// request collapsed onto it. The batcher is where a list and one-id
// requests share a fetch: a one-id request that joins an id of the list's
// batch not yet sent is retried on its own if that batch fails
// (batch.Loader), and one that comes later fetches for itself.
func (x *exchange) fetchMissing(parts listParts) {
	ctx := x.r.Context()
	for _, p := range parts {
		if p.E == nil {
			p.X.refresh = true // both tiers were just read for this id
		}
	}
	if err := x.enlist(ctx, parts); err != nil {
		x.refuseMissing(parts, err)
		return
	}
	// Each on a goroutine of its own, within max_body_bytes for the
	// list's elements together (splitpart.Parts.Fetch). Not x in the
	// goroutines: x stays on its caller's stack.
	h := x.r.Header
	parts.Fetch(ctx, x.h.maxBody, func(ctx context.Context, px *exchange) (*cache.Entry, bool, error) {
		e, foreign, err := fetchPart(ctx, px)
		if ref := bulkanswer.ListRefusal(err, h, parts.Has); ref != nil {
			return ref, false, nil // the list's own call refused: so is the list
		}
		return e, foreign, err
	}, panickedPart)
	x.fetchForeign(ctx, parts) // foreign.go
}

// fetchPart is the batched fetch of a list's id (fetchMissing), by its
// per-ID exchange px: the id's answer, and whether it was made for
// another request (flight.foreign).
func fetchPart(ctx context.Context, px *exchange) (*cache.Entry, bool, error) {
	f, err := px.fillTraced(ctx)
	if err != nil {
		return nil, false, err
	}
	return f.c.e, f.foreign, nil
}

// panickedPart logs a panic in a list's id's fetch, which answers the
// id 502 (splitpart.Parts.Fetch): a bug, not the upstream, logged with
// its stack; the list's answer and its log line carry no stack. px is
// the id's own exchange.
func panickedPart(px *exchange, v any, stack []byte) {
	px.h.log.Error("split fetch panicked", "route", px.rs.rt.Name, "panic", fmt.Sprint(v), "stack", string(stack))
}

// enlist puts the list's missing ids into the target's batches at once
// (batch.Loader.Enlist), so they share its first calls however late the
// per-id goroutines below reach the batcher: on a loaded machine they came
// one max_wait window apart, each opening a call of its own, and a list of
// good ids spent its budget and answered 502.
//
// An error is the batcher refusing the list, its group's queue full
// (batch.ErrQueueFull): none of its ids was enlisted.
func (x *exchange) enlist(ctx context.Context, parts listParts) error {
	var first *exchange
	ids := make([]string, 0, len(parts))
	for id, p := range parts {
		if p.E != nil || !p.X.batched() {
			continue
		}
		if first == nil {
			first = p.X
		}
		ids = append(ids, id)
	}
	if first == nil {
		return nil
	}
	// The batches' arg is a copy: the batch goroutine reads it while the
	// per-id goroutines run with their own.
	return first.rs.batcher.Enlist(ctx, first.list, first.rs.fwd.group(first.r), first.detach(), ids)
}

// refuseMissing fails the list's ids not read from the cache with the
// batcher's refusal (503, bulkanswer.Failed), without a fetch: each is
// settled as a failed fetch's is (served stale within stale_if_error).
func (x *exchange) refuseMissing(parts listParts, err error) {
	for _, p := range parts {
		if p.E == nil {
			p.Settle(nil, bulkanswer.Failed(err))
		}
	}
}

// joinParts writes the reassembled array (splitpart.Parts.Join,
// internal/splitlist), or the first id's failure.
func (x *exchange) joinParts(ids []string, parts listParts, hits int) {
	misses := len(parts) - hits
	size := parts.Bytes()
	if size > x.h.maxBody {
		// Over the bound with the elements fetched for another request
		// (fetchForeign): passed through as below.
		x.passListTooLarge(nil)
		return
	}
	l, stale, bad := parts.Join(ids, x.rs.rt.Split.Route.Key.Headers...)
	switch {
	case bad == nil:
	case errors.Is(bad.Err, bulkanswer.ErrUnattributed):
		// The upstream names an id of the list otherwise: its own
		// list answers, as for a list spelled otherwise than the
		// cache stores it (splitpart.AsAsked).
		x.pass(outBypass, "split-spelling")
		return
	case errors.Is(bad.Err, bulkanswer.ErrElementTooLarge):
		// The list cannot be assembled within max_body_bytes, so the
		// upstream's own list answers, streamed through.
		x.passListTooLarge(bad.X.rs)
		return
	case bad.Err != nil:
		s := x.status(outError, nil, 0)
		s.Detail = "split"
		ue := upfail.Classify(bad.Err)
		x.h.logUpstream(x.r, x.rs.m.Name(), ue.Code, bad.Err)
		x.writeFailure(ue, s)
		x.count(outcomes[outError].result)
		return
	default:
		// The upstream's own answer to this id alone, refusing it.
		s := x.status(outMiss, nil, bad.E.Status)
		s.Detail = "split"
		x.writeEntry(bad.E, s, false)
		x.count(outcomes[outMiss].result)
		return
	}
	o := outHit
	if misses > 0 {
		o = outMiss
	}
	s := x.status(o, nil, 0)
	s.Detail = `"split hits=` + strconv.Itoa(hits) + ` misses=` + strconv.Itoa(misses)
	if stale > 0 {
		s.Detail += ` stale=` + strconv.Itoa(stale)
	}
	s.Detail += `"`
	// The answer and, for a client that takes gzip, its coding (at most
	// as large), held while it is written: within 2 × max_body_bytes.
	x.rs.mem.Take(2 * size)
	defer x.rs.mem.Release(2 * size)
	l.Answer().Write(x.w, x.r, s.String(), &x.h.gzips) // a 304 for a matching If-None-Match
	x.count(outcomes[o].result)
}

// passListTooLarge passes a list over max_body_bytes through to the
// upstream's list, streamed and uncached, as any answer over the bound
// (Cache-Status detail=too-large), counted for the batch route target
// (nil: the list's target route).
func (x *exchange) passListTooLarge(target *routeState) {
	if target == nil {
		target = x.st.routes[x.rs.rt.Split.Route]
	}
	if target != nil {
		target.bm.TooLarge("list")
	}
	x.pass(outTooLarge, "")
}
