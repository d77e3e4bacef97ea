package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sidecache/sidecache/internal/bulk"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/route"
	"github.com/sidecache/sidecache/internal/spelling"
	"github.com/sidecache/sidecache/internal/splitlist"
	"github.com/sidecache/sidecache/internal/upfail"
)

// split answers a list request (GET /users?ids=3,1,2) per id from the
// per-ID route's cache; only the missing ids go upstream, through the
// batcher, and the array is reassembled in the requested order. Unknown
// ids are left out, as an upstream answering with a SQL `IN (…)` would; a
// list that asks for an id twice, or spells one otherwise than the cache
// stores it, passes through (asAsked). An id the target route's
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
	if reason := asAsked(list, ids); reason != "" {
		x.pass(outBypass, reason)
		return
	}
	parts := x.perID(target, ids)
	hits := x.readAll(parts)
	if listBytes(parts) > x.h.maxBody {
		// Its cached elements alone are over the bound: the upstream's
		// list answers, streamed, without fetching the rest (bulkmem.go).
		x.passListTooLarge(target)
		return
	}
	x.fetchMissing(parts)
	if x.r.Context().Err() != nil {
		return
	}
	x.joinParts(ids, parts, hits)
}

// asAsked is why a list cannot be answered per id as the upstream would
// answer it, "" when it can. ids are list's distinct ids (bulk.ParseIDs).
//
// An id asked twice: whether the upstream lists it once (an SQL IN (…),
// as the bundled demo does) or once per time asked (a loop over the ids)
// is the upstream's own choice, which the sidecar cannot know; an answer
// assembled either way was wrong for the other kind (?ids=5,5).
//
// An id not spelled the one way the cache stores it (05, +5, 5;v=1:
// spelling.CanonicalParam), as a read of the id alone must be to be
// cached: the upstream reads 05 as 5, and its bulk answer names the
// element 5, not 05, so an answer assembled per id left it out (?ids=05
// answered [] where the upstream gives user 5), and stored under
// /users/05 a 404 the upstream never gave.
//
// Either way the list passes through whole, the upstream's own answer.
func asAsked(list string, ids []string) string {
	if strings.Count(list, ",")+1 != len(ids) {
		return "split-repeat"
	}
	for _, id := range ids {
		if !spelling.CanonicalParam(id) {
			return "split-spelling"
		}
	}
	return ""
}

// part is one distinct id of a list request.
type part struct {
	x   *exchange // the per-ID request
	e   *cache.Entry
	err error
	// held is a stale entry kept for stale-if-error, as a per-ID
	// request keeps one (join); stale: e is stale, served while it is
	// revalidated or because its fetch failed.
	held  *cache.Entry
	stale bool
	// foreign: its batched answer was made for another request
	// (flight.foreign); fetchForeign asks for it again.
	foreign bool
}

// perID makes one per-ID exchange of the target route for each id (all
// distinct: asAsked) that the target route would take.
func (x *exchange) perID(target *routeState, ids []string) map[string]*part {
	parts := make(map[string]*part, len(ids))
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
			parts[id] = &part{x: proto.forID(id)}
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
	s := x.status(outBypass, nil, 0)
	s.Detail = "split-ids"
	hd := x.w.Header()
	hd.Set("Cache-Status", s.String())
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("X-Content-Type-Options", "nosniff")
	x.w.WriteHeader(http.StatusBadRequest)
	if x.r.Method != http.MethodHead {
		// The message names the fault, never the client's ids.
		_, _ = fmt.Fprintf(x.w, "%s in ?%s= (comma-separated, at most %d distinct ids)\n",
			strings.TrimPrefix(err.Error(), "bulk: "), sp.Param, sp.MaxIDs)
	}
	x.count(outcomes[outBypass].result)
}

// readAll reads every id's entry — L1, then the L2 misses in one round
// trip — and keeps those that answer; it returns how many did. A stale
// entry answers as it would a request for its id alone (cached): within
// stale-while-revalidate at once, with one background refresh; within
// stale-if-error it is held for the id's fetch failing (fetchMissing).
func (x *exchange) readAll(parts map[string]*part) int {
	ctx := x.r.Context()
	keys := make([]string, 0, len(parts))
	order := make([]*part, 0, len(parts))
	for _, p := range parts {
		keys, order = append(keys, p.x.key), append(order, p)
	}
	found, tiers, _ := x.h.cache.LookupMany(ctx, keys)
	hits := 0
	for i, p := range order {
		switch c := p.x.resolve(ctx, x.h.cache.Lookup, found[i], tiers[i]); {
		case p.x.answers(c, needFresh):
			p.e = c.e
			hits++
		case p.x.answers(c, needRevalidate):
			p.x.revalidate(c)
			p.e, p.stale = c.e, true
			hits++
		case p.x.answers(c, needIfError):
			p.held = c.e
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
func (x *exchange) fetchMissing(parts map[string]*part) {
	ctx := x.r.Context()
	for _, p := range parts {
		if p.e == nil {
			p.x.refresh = true // both tiers were just read for this id
		}
	}
	if err := x.enlist(ctx, parts); err != nil {
		x.refuseMissing(parts, err)
		return
	}
	// The bytes of the elements the list holds (bulkmem.go): an element
	// that takes them past max_body_bytes is dropped as it comes, and the
	// list passes through (joinParts), so a list of large records never
	// holds more than the bound of them, however many calls bring them.
	var held atomic.Int64
	held.Store(listBytes(parts))
	limit := x.h.maxBody // not x in the goroutines: x stays on its caller's stack
	var wg sync.WaitGroup
	for _, p := range parts {
		if p.e != nil {
			continue
		}
		px := p.x
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer p.within(&held, limit)
			defer px.settlePanic(p) // not x: the list's exchange stays on its stack
			f, err := px.fillTraced(ctx)
			if err == nil && f.foreign && idFailed(f.c.e) == nil {
				p.foreign = true
				return
			}
			var e *cache.Entry
			if err == nil {
				e = f.c.e
			}
			p.settle(e, err)
		}()
	}
	wg.Wait()
	x.fetchForeign(ctx, parts) // foreign.go
}

// settle gives p the outcome of its id's fetch, e or err: the batched
// fetch's (fetchMissing) or, for an id answered for another request, the
// list's own call's (fetchForeign). One rule for both, as a request for
// the id alone has (exchange.join):
//   - a record too large to keep (errElementTooLarge) is no upstream
//     failure, so no stale copy answers for it: the list passes through
//     to the upstream's (joinParts), as GET of the id alone does;
//   - a failure (err, or a 5xx: idFailed) serves the copy held for
//     stale-if-error (RFC 5861 §4), counted in Cache-Status as stale;
//   - else the failure is the list's 502.
func (p *part) settle(e *cache.Entry, err error) {
	if err == nil {
		err = idFailed(e)
	}
	switch {
	case err == nil:
		p.e, p.err = e, nil
	case p.held != nil && !errors.Is(err, errElementTooLarge):
		p.e, p.stale, p.err = p.held, true, nil
	default:
		p.e, p.err = nil, err
	}
}

// within keeps p's element if the list's held bytes stay within limit
// with it, and else drops it for errListTooLarge; the stale copy held for
// p, settled, is given back either way. Run on p's goroutine, once p is
// settled.
func (p *part) within(held *atomic.Int64, limit int64) {
	if p.foreign {
		return // not settled yet: fetchForeign asks again (joinParts counts it)
	}
	if p.held != nil {
		held.Add(-entryBytes(p.held))
		p.held = nil
	}
	if p.e != nil && held.Add(entryBytes(p.e)) > limit {
		p.e, p.stale, p.err = nil, false, errListTooLarge
	}
}

// idFailed is the list's failure for an id whose answer is a 5xx (502:
// the upstream's failure, never its body in the list), nil otherwise.
func idFailed(e *cache.Entry) error {
	if e.Status >= 500 {
		return &upfail.Error{Code: http.StatusBadGateway, Err: fmt.Errorf("split: id status %d", e.Status)}
	}
	return nil
}

// settlePanic turns a panic in p's fetch into p's 502, as a panicked bulk
// fetch answers its waiters (batch.Options.OnPanic): the goroutine is
// fetchMissing's own, where nothing else would recover it and the process
// would die. A bug, not the upstream: logged with its stack; the list's
// answer and its log line carry no stack. x is p's own exchange.
func (x *exchange) settlePanic(p *part) {
	v := recover()
	if v == nil {
		return
	}
	x.h.log.Error("split fetch panicked", "route", x.rs.rt.Name, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	p.e, p.err = nil, &upfail.Error{Code: http.StatusBadGateway, Err: fmt.Errorf("split: id fetch panicked: %v", v)}
}

// enlist puts the list's missing ids into the target's batches at once
// (batch.Loader.Enlist), so they share its first calls however late the
// per-id goroutines below reach the batcher: on a loaded machine they came
// one max_wait window apart, each opening a call of its own, and a list of
// good ids spent its budget and answered 502.
//
// An error is the batcher refusing the list, its group's queue full
// (batch.ErrQueueFull): none of its ids was enlisted.
func (x *exchange) enlist(ctx context.Context, parts map[string]*part) error {
	var first *exchange
	ids := make([]string, 0, len(parts))
	for id, p := range parts {
		if p.e != nil || !p.x.batched() {
			continue
		}
		if first == nil {
			first = p.x
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
// batcher's refusal (503, batchFailed), without a fetch: each is settled
// as a failed fetch's is (served stale within stale_if_error).
func (x *exchange) refuseMissing(parts map[string]*part, err error) {
	for _, p := range parts {
		if p.e == nil {
			p.settle(nil, batchFailed(err))
		}
	}
}

// joinParts writes the reassembled array (internal/splitlist), or the
// first id's failure.
func (x *exchange) joinParts(ids []string, parts map[string]*part, hits int) {
	misses := len(parts) - hits
	stale := 0
	size := listBytes(parts)
	if size > x.h.maxBody {
		// Over the bound with the elements fetched for another request
		// (fetchForeign): passed through as below.
		x.passListTooLarge(nil)
		return
	}
	l := splitlist.Make(len(parts), x.rs.rt.Split.Route.Key.Headers...)
	for _, id := range ids {
		p := parts[id]
		if p == nil {
			continue // not an id of the target route
		}
		if errors.Is(p.err, errElementTooLarge) {
			// An element too large to keep, or the elements together
			// (errListTooLarge, errAnswerTooLarge): the list cannot be
			// assembled within max_body_bytes, so the upstream's own
			// list answers, streamed through.
			x.passListTooLarge(p.x.rs)
			return
		}
		if p.err != nil {
			s := x.status(outError, nil, 0)
			s.Detail = "split"
			ue := upfail.Classify(p.err)
			x.h.logUpstream(x.r, x.rs.m.Name(), ue.Code, p.err)
			x.writeFailure(ue, s)
			x.count(outcomes[outError].result)
			return
		}
		if refusedID(p.e.Status) {
			// The upstream's own answer to this id alone, never
			// stored: the list is refused with it, as the app's list
			// endpoint refuses a query holding the id, rather than
			// told the id does not exist (200 with it left out).
			s := x.status(outMiss, nil, p.e.Status)
			s.Detail = "split"
			x.writeEntry(p.e, s, false)
			x.count(outcomes[outMiss].result)
			return
		}
		if p.stale {
			stale++
		}
		l.Add(p.e.Status, p.e.Header, p.e.Body)
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
	x.rs.held.take(2 * size)
	defer x.rs.held.release(2 * size)
	x.writeList(l.Answer(), s)
	x.count(outcomes[o].result)
}

// refusedID reports whether an id's answer is the upstream refusing it
// (a 4xx other than 404 and 410, which say the id is unknown: those are
// left out of the list, as SQL's IN (…) leaves them out).
func refusedID(status int) bool {
	return status >= 400 && status <= 499 && status != http.StatusNotFound && status != http.StatusGone
}

// writeList answers a split list request with the reassembled array, its
// header as splitlist sets it, and a 304 when the client's If-None-Match
// holds its ETag (RFC 9110 §13.1.2).
func (x *exchange) writeList(a splitlist.Answer, s status) {
	hd := x.w.Header()
	gz := a.SetHeader(hd, x.r.Header["Accept-Encoding"])
	hd.Set("Cache-Status", s.String())
	if httpcache.NotModified(x.r, hd) {
		x.w.WriteHeader(http.StatusNotModified)
		return
	}
	body := a.Body
	if gz {
		body = x.h.gzips.Compress(body)
		hd.Set("Content-Encoding", "gzip")
	}
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	x.w.WriteHeader(http.StatusOK)
	if x.r.Method != http.MethodHead {
		_, _ = x.w.Write(body)
	}
}

// errListTooLarge is a split list's element dropped because the list's
// elements together are over max_body_bytes (part.within): the list
// passes through, as it does for an element too large to keep.
var errListTooLarge = fmt.Errorf("split list over max_body_bytes: %w", errElementTooLarge)

// entryBytes is what an entry adds to a list's answer: its body and a
// comma, for an element (200); nothing for an id left out.
func entryBytes(e *cache.Entry) int64 {
	if e.Status != http.StatusOK {
		return 0
	}
	return int64(len(e.Body)) + 1
}

// listBytes is the size of the list's answer from the elements its parts
// hold, and of the stale copies they hold for stale-if-error (bulkmem.go).
func listBytes(parts map[string]*part) int64 {
	var n int64
	for _, p := range parts {
		if p.e != nil {
			n += entryBytes(p.e)
		}
		if p.held != nil {
			n += entryBytes(p.held)
		}
	}
	return n
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
