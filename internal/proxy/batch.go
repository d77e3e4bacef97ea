package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/batch"
	"github.com/sidecache/sidecache/internal/batchroute"
	"github.com/sidecache/sidecache/internal/bulk"
	"github.com/sidecache/sidecache/internal/bulkanswer"
	"github.com/sidecache/sidecache/internal/bulkelem"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/elemkey"
	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/redisbudget"
	"github.com/sidecache/sidecache/internal/route"
	"github.com/sidecache/sidecache/internal/surrogate"
)

// batcher is a route's loader: the opener's exchange rides along to make
// the bulk call with its headers.
// Its values are pointers into one slice per bulk call (fetchBulk): an
// element's answer is too large to hand around by value, and was one
// allocation per id. They come in the order of the call's ids
// (batch.NewList), as fetchBulk answers every id it asked for, an absent
// one with its 404: no map per call.
type batcher = batch.Loader[*exchange, *bulkanswer.Answer]

func (h *Handler) newBatcher(rs *routeState) *batcher {
	return batch.NewList(batchroute.Options(rs.rt, rs.m, rs.bm, batchroute.Hooks{
		Timeout: func() time.Duration { return h.state.Load().timeout },
		Now:     h.now,
		Refused: func(v any) bool { return v.(*bulkanswer.Answer).Refused },
		OnPanic: func(v any, stack []byte) {
			// A bug, not the upstream: logged once per bulk call, with
			// its stack; each waiter answers 502 (batchedFlight) and
			// logs the failure without the stack.
			h.log.Error("batch fetch panicked", "route", rs.rt.Name, "panic", fmt.Sprint(v), "stack", string(stack))
		}}),
		func(ctx context.Context, x *exchange, ids []string) ([]*bulkanswer.Answer, error) {
			// A batch is every joiner's, not its opener's: ctx is the
			// opener's (batch.Loader), and with it the opener's Redis
			// budget (internal/redisbudget), which l2.Store.Set reads
			// to drop the store of a request whose budget Redis has
			// spent. A batch opened by a miss whose L2 read had just
			// timed out stored nothing in L2 for the ids other
			// requests joined it with, their own budgets whole: their
			// leases were released with no fill, and every other
			// replica fetched those ids again. No request waits on the
			// batch's stores (queued, bounded by the writer's queue and
			// the breaker), so they carry no request's budget.
			return x.fetchBulkTraced(redisbudget.Without(ctx), ids)
		})
}

// loadBatched answers one per-ID miss through the route's batcher.
func (x *exchange) loadBatched(ctx context.Context) (*flight, error) {
	id := x.params.Get(x.rs.rt.Batch.IDParam)
	ans, found, err := x.rs.batcher.LoadAs(ctx, x.list, x.rs.fwd.group(x.r), x, id)
	if err != nil && ctx.Err() != nil {
		return nil, err
	}
	f, err := batchedFlight(x.h.now, new(flight), ans, found, err)
	if err == nil {
		f.foreign = ans.NotFor(f.c.private, x.r.Header)
	}
	return f, err
}

// loadBatchedTo goes on with fl, the flight of a batched miss
// (fillFirst): it joins the batch with a lead and returns, and the
// batch's goroutine finishes fl when the id is answered (lead.Loaded). So
// a batched miss costs no goroutine of its own, and its waiters are woken
// once, by the batch, instead of by a flight goroutine the batch woke.
// The leader still stops waiting when its client leaves (coalesce.DoThen),
// and the batch goes on and stores the id's element (fetchBulk) for the
// next request. ctx is the flight's (coalesce: never cancelled), so the
// batch's failure is always the upstream's (batchedFlight). The exchange
// is copied (detach, with the base fillCached chose) only when this id
// opens a batch: the batch makes its bulk call with the opener's.
//
// m is the lead join made for the flight, which holds its Flight
// (coalesce.Group.DoThenIn): the batch finishes it (lead.Loaded).
func (x *exchange) loadBatchedTo(ctx context.Context, m *lead, stale candidate) {
	m.h, m.base, m.req = x.h, x.base.e, x.r
	m.f.stale = staleRef(stale)
	id := x.params.Get(x.rs.rt.Batch.IDParam)
	x.rs.batcher.LoadTo(ctx, x.list, x.rs.fwd.group(x.r), func() *exchange { return x.detach() }, id, m, &m.slot)
}

// Loaded finishes the flight loadBatchedTo handed to the batch with the
// id's answer (batch.Waiter), on the batch's goroutine (or the leader's,
// when the batch settles the id at once).
func (m *lead) Loaded(ans *bulkanswer.Answer, found bool, err error) {
	stale := m.f.stale // fillFirst's, before batchedFlight makes m.f anew
	m.fl.FinishWith(func() (*flight, error) {
		f, err := batchedFlight(m.h.now, &m.f, ans, found, err)
		if err == nil {
			f.foreign = ans.NotFor(f.c.private, m.req.Header)
		}
		if err != nil {
			if !bulkanswer.Passes(err) {
				err = mustRevalidateError(m.base, err)
			}
			f = &m.f // keeps the stale copy reachable for the waiters
			*f = flight{}
		}
		f.stale = stale
		return f, err
	})
}

// batchedFlight is the flight of one id the batcher answered, made in f;
// now tells when, for an absent id's 404, and is read for that alone: a
// batch tells its ids one after another on its goroutine, and a clock
// read per found id was spent for nothing. ans is shared by the id's
// waiters: it is only read. An error is the batch's (a waiter whose ctx
// ended has its own: loadBatched).
func batchedFlight(now func() time.Time, f *flight, ans *bulkanswer.Answer, found bool, err error) (*flight, error) {
	switch {
	case errors.Is(err, bulkanswer.ErrElementTooLarge):
		return nil, bulkanswer.ErrElementTooLarge
	case err != nil:
		return nil, bulkanswer.Failed(err)
	case found && ans.Unattributed:
		return nil, bulkanswer.ErrUnattributed
	}
	if !found {
		*f = flight{c: candidate{e: bulkanswer.NotFound(now())}, batched: true}
		return f, nil
	}
	// The header is read again even though ans.Private was judged where
	// the answer was made: a private answer handed to another identity is
	// the one failure this path must never have, and a second reading
	// costs ~0.1 µs an id (issue 23's profile), so a later change to how
	// keepElement judges privacy cannot open it alone.
	*f = flight{c: candidate{e: ans.E, private: ans.Private || httpcache.Private(ans.E.Header), vary: ans.Vary, vkey: ans.VKey}, stored: ans.Stored, batched: true, unstorable: ans.Unstorable}
	if c := ans.Call; c != nil {
		f.link, f.upstream, f.reqID = &c.Link, c.Upstream, c.ReqID
	}
	return f, nil
}

// forID is the exchange a client would have made for one id of the batch
// route: same host and headers, the route's path with the id in it.
func (x *exchange) forID(id string) *exchange {
	rt := x.rs.rt
	c := x.detach()
	c.r = perIDRequest(x.r, rt, id)
	c.params.set(route.Params{{Key: rt.Batch.IDParam, Value: id}})
	c.key = cachekey.Build(c.r, &rt.Key)
	c.vnames, c.vcoding, c.vkey = nil, "", ""
	return c
}

// elementExchange is forID for the elements of one bulk answer, taken one
// at a time: one exchange, request and URL for the whole answer, aimed at
// each id in turn by setID, rather than the three of forID per element.
// Nothing keepElement calls keeps the exchange, its request or its params
// past the call (they become the entry's key and tags, which are strings),
// so reusing them is safe as long as the elements are kept one by one.
func (x *exchange) elementExchange() *exchange {
	c := x.detach()
	c.r = perIDRequest(x.r, x.rs.rt, "")
	c.params.set(route.Params{{Key: x.rs.rt.Batch.IDParam}})
	return c
}

// setID aims an elementExchange at id, as forID(id) would; key is the
// frame of its keys (cachekey.NewFrame of its request), as they differ in
// their path alone. The strings the element's entry keeps, its URI tag,
// key and expanded tag templates (returned, in tags' array), are laid out
// in room when it holds them (internal/elemkey).
func (c *exchange) setID(id string, key *cachekey.Frame, room []byte, tags *[elemkey.MaxTags]string) []string {
	c.params.in[0].Value = id
	uri, k, out := elemkey.Layout(c.rs.rt, id, c.params.list(), key, room, tags)
	c.uriTag = uri
	c.r.URL.Path = uri[len(surrogate.URITagPrefix):]
	c.key = k
	c.vnames, c.vcoding, c.vkey = nil, "", ""
	return out
}

// fetchBulk makes the one upstream call of a batch and turns its JSON
// array into one entry per requested id, admitted and stored exactly as a
// per-ID fetch would have been: the route's key, TTL and tags, through the
// same admit. Ids absent from the answer become 404s (negative-cached under
// negative_ttl).
//
// A call that fails in a way one id may cause (bulkanswer.ErrBulk) is
// returned wrapped with batch.ErrIsolate, and the loader halves the batch.
// When one id alone still gets a 4xx, that id is answered with the
// upstream's own answer to the one-id bulk call, its status, body and
// headers, with TTL 0: never stored, and never seen by another id, whose
// call did not include it. That answer, rather than a per-ID request to
// the route's own URL, because it is the upstream's word on exactly this
// id, it costs no call past the isolation's own (at most 2n−2 for a batch
// of n), and the route's per-ID URL need not be one the upstream serves as
// the bulk endpoint does. A lone id whose answer has the wrong shape gets
// 502: a body that is not its element is not handed out as one.
func (x *exchange) fetchBulk(ctx context.Context, ids []string) ([]*bulkanswer.Answer, error) {
	rt := x.rs.rt
	ctx, cancel := context.WithTimeout(ctx, x.st.timeout)
	defer cancel()
	path, rawQuery, _ := strings.Cut(bulk.URL(rt.Batch.Path, rt.Batch.Param, ids), "?")
	out := x.outgoing(ctx, path, rawQuery)
	// The answer is split here, so let the transport negotiate and undo
	// compression (lean.Send does as http.Transport does): stored
	// elements are identity-coded.
	out.Header.Del("Accept-Encoding")
	out.Header.Set("Accept", "application/json")
	t0 := x.h.now()
	resp, err := x.st.send(out)
	if err != nil {
		x.rs.m.Upstream(0, x.h.now().Sub(t0))
		return nil, fmt.Errorf("%w: %w", bulkanswer.ErrBulk, err)
	}
	defer resp.Body.Close()
	// One response: never more of it than max_body_bytes, read into a
	// buffer of the route's (internal/bulkmem).
	limit := x.h.maxBody
	body, buf, err := x.rs.mem.Read(resp.Body, resp.ContentLength, limit)
	held := int64(len(body))
	x.rs.mem.Take(held)
	defer x.rs.mem.Release(held)
	took := x.h.now().Sub(t0)
	x.rs.m.Upstream(resp.StatusCode, took)
	// Only a 200 or 203 is the whole list asked for (RFC 9110 §15.3): a
	// 206 holds part of it (the ids it leaves out would be stored as
	// 404s), a 201, 202 or 204 no list at all. None is an id's fault:
	// the whole batch fails, with no retry.
	ok := resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNonAuthoritativeInfo
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: read: %w", bulkanswer.ErrBulk, err)
	case resp.StatusCode == http.StatusInternalServerError:
		return nil, fmt.Errorf("%w: %w: status %d", bulkanswer.ErrBulk, batch.ErrSuspect, resp.StatusCode)
	case !ok && !bulk.Isolable(resp.StatusCode):
		return nil, fmt.Errorf("%w: status %d", bulkanswer.ErrBulk, resp.StatusCode)
	case int64(len(body)) > limit && len(ids) == 1:
		// A record too large to keep: its requests pass through (join),
		// as any cached route's answer over max_body_bytes does, and so
		// do the id's next requests for a while (hit-for-pass, as
		// passVariant marks a per-key fill's): in a shared call it would
		// take the answer over the bound and have every request of the
		// call asked for again apart.
		x.rs.bm.TooLarge("answer")
		x.h.hfp.Add(x.forID(ids[0]).key, x.h.now().Add(x.passFor()))
		return nil, fmt.Errorf("%w: %w", bulkanswer.ErrBulk, bulkanswer.ErrElementTooLarge)
	case int64(len(body)) > limit:
		// Too large for its ids together, not for any one of them: each
		// client request's ids are asked for again apart, never halved
		// (batch.ErrApart; internal/bulkmem). A one-id request's record then
		// comes in a call of its own (stored, or passed through if it
		// alone is over the bound: one call more than its budget of two,
		// for a record no call could have kept), a list's own call over
		// the bound passes the list through.
		x.rs.bm.TooLarge("answer")
		return nil, fmt.Errorf("%w: %w: %w", bulkanswer.ErrBulk, batch.ErrApart, bulkanswer.ErrAnswerTooLarge)
	case !ok && len(ids) == 1:
		e := bulkanswer.Own(resp, body, t0)
		return []*bulkanswer.Answer{{E: e, Call: bulkanswer.NewCall(x.r.Header, resp.Header, out.Header, took, x.rs.fwd.rules, neverForwarded), Refused: true, Private: httpcache.Private(e.Header)}}, nil
	case !ok:
		// Kept with its failure: a split list whose own call it was is
		// refused with it (bulkanswer.ListRefusal).
		err := fmt.Errorf("%w: %w: status %d", bulkanswer.ErrBulk, batch.ErrIsolate, resp.StatusCode)
		return nil, bulkanswer.NewRefusal(err, resp, body, t0, ids, x.r.Header)
	}
	// Room past each element for its ETag (keepElement), and for the
	// strings its entry keeps (setID).
	ex := x.elementExchange()
	// admit judges each element by what this call sent (sentWithout,
	// sentUnvaried), not by the route's rules when the answer comes: its
	// header, but for the Accept it sets itself (bulkelem's Vary exempts
	// it). One copy per call, not per element.
	ex.sent = out.Header.Clone()
	delete(ex.sent, "Accept")
	frame := cachekey.NewFrame(ex.r, &rt.Key)
	parts, strays, err := bulk.SplitForRoomStrays(body, rt.Batch.IDField, ids, bulk.ETagLen+elemkey.Room(rt, ids, &frame))
	// Nothing holds body past the split: the elements are copies, an
	// error's text too.
	x.rs.mem.Reuse(buf, body)
	switch {
	case errors.Is(err, bulk.ErrShape) && len(ids) > 1:
		return nil, fmt.Errorf("%w: %w: %w", bulkanswer.ErrBulk, batch.ErrIsolate, err)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", bulkanswer.ErrBulk, err)
	}
	res := make([]*bulkanswer.Answer, len(ids))
	answers := make([]bulkanswer.Answer, len(ids))
	call := bulkanswer.NewCall(x.r.Header, resp.Header, out.Header, took/time.Duration(len(ids)), x.rs.fwd.rules, neverForwarded)
	heads := x.elementHeads(resp.Header, out.Header, t0)
	var tagArray [elemkey.MaxTags]string
	ex.sets = bulkelem.NewSets()
	for i, id := range ids {
		elem, room := parts[i], []byte(nil)
		if elem == nil && strays > 0 {
			// Not known absent: the answer names its elements
			// otherwise (bulkanswer.ErrUnattributed). The id's requests
			// pass through, and so do its next ones for a while
			// (hit-for-pass), as a record too large to keep does.
			x.h.hfp.Add(x.forID(id).key, x.h.now().Add(x.passFor()))
			answers[i] = bulkanswer.Answer{Unattributed: true, Call: call}
			res[i] = &answers[i]
			continue
		}
		if n := len(elem); elem != nil {
			// The element, its ETag's room (bulk.ETagAfter) and past
			// them the room of its strings.
			elem, room = elem[:n:n+bulk.ETagLen], elem[n+bulk.ETagLen:n+bulk.ETagLen:cap(elem)]
		}
		tags := ex.setID(id, &frame, room, &tagArray)
		ex.sets.Cur = i
		a := &answers[i]
		*a = ex.keepElement(ctx, elem, resp.Header, heads, t0, tags)
		a.Call = call
		res[i] = a
	}
	ex.storeElements(ctx, answers, resp.Header)
	return res, nil
}

// perIDRequest is the request a client would have sent for one id of a
// batch route: same host and headers, the route's path with the id in it.
func perIDRequest(r *http.Request, rt *route.Route, id string) *http.Request {
	r2 := new(http.Request)
	*r2 = *r
	r2.Method = http.MethodGet
	u := *r.URL
	u.Path, u.RawPath, u.RawQuery = rt.PathFor(rt.Batch.IDParam, id), "", ""
	r2.URL = &u
	return r2
}
