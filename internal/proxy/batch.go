package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unsafe"

	"github.com/sidecache/sidecache/internal/batch"
	"github.com/sidecache/sidecache/internal/bulk"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/forward"
	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/route"
	"github.com/sidecache/sidecache/internal/surrogate"
	"github.com/sidecache/sidecache/internal/upfail"
)

// errBulk marks a failed bulk call. Its waiters answer 502 (504 when it
// ran out of upstream.timeout: batchFailed): a batch never hands out a
// body it could not attribute to an id with certainty.
//
// A failure that may be caused by some of the ids rather than by the
// upstream being unwell is isolated (batch.ErrIsolate): the loader asks
// again for each client request's ids apart, and halves one request's ids,
// within the request's call budget, so the good ids still get their
// elements. Those failures are a 4xx answer other than 408 and 429
// (bulk.Isolable) and a valid JSON answer of the wrong shape
// (bulk.ErrShape). A 500 may be either an id's fault (a framework answers
// 500 for an id its database cannot parse) or the upstream's: it is
// isolated while the upstream answers other calls (batch.ErrSuspect).
// Everything else fails the whole batch at once, with no retry, so a
// struggling upstream is not sent more calls: 502, 503, 504 (RFC 9110
// §15.6.3-5 name the upstream's own state, never the request's), a 408 or
// 429 (the upstream asks for less, not more), a timeout, a refused or cut
// connection, broken JSON. An answer over max_body_bytes is retried per
// request (batch.ErrApart: errAnswerTooLarge, bulkmem.go).
var errBulk = errors.New("bulk call failed")

// errElementTooLarge is a one-id bulk call whose answer is over
// max_body_bytes: no upstream failure, a record too large to keep. Its
// requests pass through to the upstream, streamed and uncached (join,
// joinParts), as a cached route's answer over the bound is; a 502 served
// it to no one, and cost an upstream call per request.
var errElementTooLarge = errors.New("element over max_body_bytes")

// defaultQuarantine is how long an id that failed a bulk call and then
// failed alone is fetched alone when the route's negative_ttl is 0:
// negative_ttl 0 promises that no failed answer is served from memory, and
// the quarantine serves none (each of its ids still gets its own call), so
// it still applies, for a short while.
const defaultQuarantine = 10 * time.Second

// maxBulkBuf is the largest buffer a route keeps to read its next bulk
// answer into (routeState.bulkBufs).
const maxBulkBuf = 1 << 20

// bulkAnswer is one id's share of a bulk call.
type bulkAnswer struct {
	e    *cache.Entry
	call *bulkCall // what every id of the call shares; nil: nothing
	// refused: the upstream's own failing answer to a one-id call.
	refused bool
	stored  bool
	// private: for the request whose headers made the call only (the
	// others fetch their own: madeFor, foreign.go), judged once per id
	// where the answer is made: by keepElement (its reason, or admit's
	// Shareable, which reads the same header), for an own answer by its
	// header (httpcache.Private); the waiters' flights read the entry's
	// header again as well (batchedFlight). vary and vkey: the variant it
	// is, when stored as one.
	private bool
	// unstorable: flight.unstorable, for the lease of the id (leasePass).
	unstorable bool
	vary       []string
	vkey       string
}

// bulkCall is what the answers of one bulk call share, held once for
// all of them rather than copied into each (an answer is made per id).
type bulkCall struct {
	link spanLink // the bulk call (trace.go)
	// upstream is each id's share of the bulk call's time (the call's
	// time over its ids), for the access log.
	upstream time.Duration
	reqID    string // the bulk call's X-Request-Id
	// from is the header of the client request whose headers the call
	// carried (its opener's; a one-id request's isolation retry carries
	// that request's: lead.RetryArg; a list's, the opener's). An answer
	// only that request may have (private, or varying on a header the
	// members may send differently) goes to its requests alone: madeFor.
	from http.Header
	// vary are the client headers the answer's Vary names (varyMatched)
	// and sent the call's own header: an element is the variant of the
	// values sent carried of them (absent ones included: a header the
	// route withheld until it learns it from a Vary,
	// forward.Rules.LearnVary), which answers no request that carried
	// other values (RFC 9111 §4.1), opener or member: withheldFrom. The
	// call's record, never the route's rules, which may have changed
	// since it left (a Vary learned, or a reload) and, with them, what a
	// group holds. fwd is the route's forwarding, which a request with a
	// withheld header teaches it, so that its own call carries it.
	vary []string
	sent http.Header
	fwd  *forwarding
}

// newBulkCall is what the answers of the bulk call x sent as out, whose
// answer's header is upstream, share.
func (x *exchange) newBulkCall(upstream, out http.Header, took time.Duration) *bulkCall {
	c := &bulkCall{upstream: took, reqID: out.Get("X-Request-Id"), from: x.r.Header}
	if _, varies := upstream["Vary"]; varies {
		c.vary, c.sent, c.fwd = varyMatched(upstream), out, x.rs.fwd
	}
	return c
}

// varyMatched lists the headers upstream's Vary names that a request
// must match the bulk call in (withheldFrom), but Accept-Encoding and
// Accept: the bulk call sends its own of those for every request of the
// batch, and the transport undoes the coding (elementVary); and but the
// headers the sidecar writes or never forwards: elementVary makes such an
// answer the opener's alone (private, madeFor).
func varyMatched(upstream http.Header) []string {
	names, _ := cachekey.ParseVary(upstream)
	var vary []string
	for _, n := range names {
		if n != "Accept-Encoding" && n != "Accept" && !forward.Own(n) && !neverForwarded(n) {
			vary = append(vary, n)
		}
	}
	return vary
}

// batcher is a route's loader: the opener's exchange rides along to make
// the bulk call with its headers.
// Its values are pointers into one slice per bulk call (fetchBulk): an
// element's answer is too large to hand around by value, and was one
// allocation per id. They come in the order of the call's ids
// (batch.NewList), as fetchBulk answers every id it asked for, an absent
// one with its 404: no map per call.
type batcher = batch.Loader[*exchange, *bulkAnswer]

func (h *Handler) newBatcher(rs *routeState) *batcher {
	b := rs.rt.Batch
	quarantine := rs.rt.NegativeTTL
	if quarantine <= 0 {
		quarantine = defaultQuarantine
	}
	return batch.NewList(batch.Options{MaxSize: b.MaxSize, MaxWait: b.MaxWait, MaxInFlight: b.MaxInFlight,
		MaxQueued:      queuedRounds * max(b.MaxSize, 1) * inFlight(b.MaxInFlight),
		MaxInFlightAll: routeInFlight(b),
		MaxQueuedAll:   queuedRounds * max(b.MaxSize, 1) * routeInFlight(b),
		// A batch goes within its window and one in-flight call's time
		// (each call ends within upstream.timeout), or fails 504: read
		// as each batch opens, so a reloaded timeout applies at once.
		Deadline: func() time.Duration { return b.MaxWait + h.state.Load().timeout },
		OnDrop:   func(reason error, ids int) { rs.bm.Dropped(droppedReason(reason), ids) },
		OnBatch:  rs.m.BatchSize, OnIsolate: rs.m.BatchIsolated, OnOverflow: rs.m.BatchOverflow,
		Quarantine: quarantine, Now: h.now,
		Refused:      func(v any) bool { return v.(*bulkAnswer).refused },
		OnQuarantine: rs.bm.Quarantined, OnEvict: rs.bm.QuarantineEvicted, OnBudget: rs.bm.BudgetExhausted,
		OnPanic: func(v any, stack []byte) {
			// A bug, not the upstream: logged once per bulk call, with
			// its stack; each waiter answers 502 (batchedFlight) and
			// logs the failure without the stack.
			h.log.Error("batch fetch panicked", "route", rs.rt.Name, "panic", fmt.Sprint(v), "stack", string(stack))
		}},
		func(ctx context.Context, x *exchange, ids []string) ([]*bulkAnswer, error) {
			return x.fetchBulkTraced(ctx, ids)
		})
}

// queuedRounds is how many rounds of bulk calls (max_size ids times
// max_in_flight calls each) a batch group may hold queued behind its
// calls in flight (batch.Options.MaxQueued): past it a miss is refused
// 503 at once (errBusy) rather than queued for a deadline it would miss.
// A group with nothing queued takes one request of any size, so a list
// of split.max_ids ids is never refused by an idle group; otherwise lists
// may hold ¾ of it, the rest left to one-id misses, whose batches also go
// ahead of a list's queued calls every other call (batch.Options.MaxQueued).
// Fourteen, not ten: at defaults (max_size 100, max_in_flight 2) the
// lists' share is then 2,100 ids, so two lists of the default
// split.max_ids (1,000) fit at once, as they did before the share.
const queuedRounds = 14

// inFlight is max_in_flight as the loader reads it (unset: the default).
func inFlight(n int) int {
	if n < 1 {
		return batch.DefaultMaxInFlight
	}
	return n
}

// routeGroups is how many groups' max_in_flight the route's bulk calls
// may number at once by default (batch.max_route_in_flight, which the
// config fills with the same product). A group is what the requests
// forward (the Host, keyed headers), and a client chooses it: bounded
// per group only, one client spelling its Host 1,024 ways had the bulk
// endpoint carry 2,048 calls and the route queue 2.8 M ids. Varnish's
// backend .max_connections and NGINX's server max_conns bound what a
// backend carries whatever clients send, and so does this; not to
// max_in_flight itself, which the contract makes per group: a route
// keyed on a header with a few values (Accept-Language) or reached under
// a couple of Host spellings would then see its groups' calls wait for
// one another, throughput cut by their number. Four groups' worth keeps
// those at full speed and the upstream's load a small stated multiple of
// what the operator set; the queue bound follows it (MaxQueuedAll).
const routeGroups = 4

// routeInFlight is max_route_in_flight as the loader reads it (unset:
// routeGroups groups' max_in_flight).
func routeInFlight(b *route.Batch) int {
	if b.MaxRouteInFlight > 0 {
		return b.MaxRouteInFlight
	}
	return routeGroups * inFlight(b.MaxInFlight)
}

// droppedReason is the sidecache_batch_dropped_total reason of a
// batch.Options.OnDrop reason (metrics.DroppedReasons).
func droppedReason(err error) string {
	switch {
	case errors.Is(err, batch.ErrQueueFull):
		return "queue-full"
	case errors.Is(err, batch.ErrDeadline):
		return "deadline"
	}
	return "abandoned"
}

// batchFailed is the answer to a batched miss whose load failed: 503
// when the batcher refused it (its group's queue full, Retry-After set by
// the writer: writeFailure), 504 when its batch was not sent in time or
// its bulk call ran out of upstream.timeout, as any upstream timeout is
// (RFC 9110 §15.6.5: a healthy bulk endpoint on a loaded machine is slow,
// not broken), else 502 (a failed bulk call).
func batchFailed(err error) *upfail.Error {
	switch {
	case errors.Is(err, batch.ErrQueueFull):
		return &upfail.Error{Code: http.StatusServiceUnavailable, Err: err}
	case errors.Is(err, batch.ErrDeadline) || upfail.TimedOut(err):
		return &upfail.Error{Code: http.StatusGatewayTimeout, Err: err}
	}
	return &upfail.Error{Code: http.StatusBadGateway, Err: err}
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
		f.foreign = ans.notFor(f.c.private, x.r.Header)
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
func (m *lead) Loaded(ans *bulkAnswer, found bool, err error) {
	stale := m.f.stale // fillFirst's, before batchedFlight makes m.f anew
	m.fl.FinishWith(func() (*flight, error) {
		f, err := batchedFlight(m.h.now, &m.f, ans, found, err)
		if err == nil {
			f.foreign = ans.notFor(f.c.private, m.req.Header)
		}
		if err != nil {
			if !errors.Is(err, errElementTooLarge) {
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
func batchedFlight(now func() time.Time, f *flight, ans *bulkAnswer, found bool, err error) (*flight, error) {
	if errors.Is(err, errElementTooLarge) {
		return nil, errElementTooLarge
	}
	if err != nil {
		return nil, batchFailed(err)
	}
	if !found {
		*f = flight{c: candidate{e: notFoundEntry(now())}, batched: true}
		return f, nil
	}
	// The header is read again even though ans.private was judged where
	// the answer was made: a private answer handed to another identity is
	// the one failure this path must never have, and a second reading
	// costs ~0.1 µs an id (issue 23's profile), so a later change to how
	// keepElement judges privacy cannot open it alone.
	*f = flight{c: candidate{e: ans.e, private: ans.private || httpcache.Private(ans.e.Header), vary: ans.vary, vkey: ans.vkey}, stored: ans.stored, batched: true, unstorable: ans.unstorable}
	if c := ans.call; c != nil {
		f.link, f.upstream, f.reqID = &c.link, c.upstream, c.reqID
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
// in room when it holds them (the capacity SplitForRoom left past the
// element's bytes and ETag), else in one allocation of their own: they
// live exactly as long as the element's body, and one object is one
// allocation and one mark for the collector in a cache of many, where
// they were one each (issue 23).
func (c *exchange) setID(id string, key *cachekey.Frame, room []byte, tags *[elementTags]string) []string {
	rt := c.rs.rt
	var scratch [256]byte
	b := room[:0]
	if cap(b) == 0 {
		b = scratch[:0]
	}
	b = rt.AppendPathFor(b, surrogate.URITagPrefix, rt.Batch.IDParam, id)
	uri := len(b)
	c.params.in[0].Value = id
	// The path, read in place by AppendKey (b's bytes are not written
	// again, and stay where they are if b grows).
	u := url.URL{Path: bytesString(b, len(surrogate.URITagPrefix), uri)}
	b = key.AppendKey(b, &u)
	k := len(b)
	var ends [elementTags]int
	n := len(rt.Tags)
	if n > elementTags {
		n = 0 // expanded by entryblock.NewElement
	}
	ps := c.params.list()
	for i, t := range rt.Tags[:n] {
		b = t.AppendExpand(b, ps)
		ends[i] = len(b)
	}
	var out []byte // b where it stays: b itself may be scratch's
	if cap(room) >= len(b) && unsafe.SliceData(b) == unsafe.SliceData(room) {
		out = room[:len(b)]
	} else {
		// Not in room: one allocation of its own, never written again.
		out = append(make([]byte, 0, len(b)), b...)
	}
	str := func(i, j int) string { return bytesString(out, i, j) }
	c.uriTag = str(0, uri)
	c.r.URL.Path = c.uriTag[len(surrogate.URITagPrefix):]
	c.key = str(uri, k)
	c.vnames, c.vcoding, c.vkey = nil, "", ""
	if n == 0 && len(rt.Tags) > 0 {
		return nil
	}
	from := k
	for i := range n {
		tags[i], from = str(from, ends[i]), ends[i]
	}
	return tags[:n]
}

// bytesString is b[i:j] as a string, without a copy: b's bytes there are
// never written again.
func bytesString(b []byte, i, j int) string { return unsafe.String(unsafe.SliceData(b[i:j]), j-i) }

// elementTags is the most tag templates setID expands for an element.
const elementTags = 4

// elementRoom is the room setID takes for the strings of the longest of
// ids, which the split leaves past each element: an id they outgrow (one
// escaped in the key) gets an allocation of its own.
func (c *exchange) elementRoom(ids []string, key *cachekey.Frame) int {
	longest := ""
	for _, id := range ids {
		if len(id) > len(longest) {
			longest = id
		}
	}
	rt := c.rs.rt
	var scratch [256]byte
	b := rt.AppendPathFor(scratch[:0], surrogate.URITagPrefix, rt.Batch.IDParam, longest)
	u := url.URL{Path: string(b[len(surrogate.URITagPrefix):])}
	b = key.AppendKey(b, &u)
	if len(rt.Tags) <= elementTags {
		ps := route.Params{{Key: rt.Batch.IDParam, Value: longest}}
		for _, t := range rt.Tags {
			b = t.AppendExpand(b, ps)
		}
	}
	return len(b)
}

// fetchBulk makes the one upstream call of a batch and turns its JSON
// array into one entry per requested id, admitted and stored exactly as a
// per-ID fetch would have been: the route's key, TTL and tags, through the
// same admit. Ids absent from the answer become 404s (negative-cached under
// negative_ttl).
//
// A call that fails in a way one id may cause (see errBulk) is returned
// wrapped with batch.ErrIsolate, and the loader halves the batch. When one
// id alone still gets a 4xx, that id is answered with the upstream's own
// answer to the one-id bulk call, its status, body and headers, with TTL 0:
// never stored, and never seen by another id, whose call did not include
// it. That answer, rather than a per-ID request to the route's own URL,
// because it is the upstream's word on exactly this id, it costs no call
// past the isolation's own (at most 2n−2 for a batch of n), and the route's
// per-ID URL need not be one the upstream serves as the bulk endpoint
// does. A lone id whose answer has the wrong shape gets 502: a body that is
// not its element is not handed out as one.
func (x *exchange) fetchBulk(ctx context.Context, ids []string) ([]*bulkAnswer, error) {
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
		return nil, fmt.Errorf("%w: %w", errBulk, err)
	}
	defer resp.Body.Close()
	// One response: never more of it than max_body_bytes (bulkmem.go).
	limit := x.h.maxBody
	buf, _ := x.rs.bulkBufs.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	body, err := readAllTo(*buf, resp.Body, resp.ContentLength, limit)
	held := int64(len(body))
	x.rs.held.take(held)
	defer x.rs.held.release(held)
	took := x.h.now().Sub(t0)
	x.rs.m.Upstream(resp.StatusCode, took)
	// Only a 200 or 203 is the whole list asked for (RFC 9110 §15.3): a
	// 206 holds part of it (the ids it leaves out would be stored as
	// 404s), a 201, 202 or 204 no list at all. None is an id's fault:
	// the whole batch fails, with no retry.
	ok := resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNonAuthoritativeInfo
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: read: %w", errBulk, err)
	case resp.StatusCode == http.StatusInternalServerError:
		return nil, fmt.Errorf("%w: %w: status %d", errBulk, batch.ErrSuspect, resp.StatusCode)
	case !ok && !bulk.Isolable(resp.StatusCode):
		return nil, fmt.Errorf("%w: status %d", errBulk, resp.StatusCode)
	case int64(len(body)) > limit && len(ids) == 1:
		// A record too large to keep: its requests pass through (join),
		// as any cached route's answer over max_body_bytes does, and so
		// do the id's next requests for a while (hit-for-pass, as
		// passVariant marks a per-key fill's): in a shared call it would
		// take the answer over the bound and have every request of the
		// call asked for again apart.
		x.rs.bm.TooLarge("answer")
		x.h.hfp.Add(x.forID(ids[0]).key, x.h.now().Add(x.passFor()))
		return nil, fmt.Errorf("%w: %w", errBulk, errElementTooLarge)
	case int64(len(body)) > limit:
		// Too large for its ids together, not for any one of them: each
		// client request's ids are asked for again apart, never halved
		// (batch.ErrApart; bulkmem.go). A one-id request's record then
		// comes in a call of its own (stored, or passed through if it
		// alone is over the bound: one call more than its budget of two,
		// for a record no call could have kept), a list's own call over
		// the bound passes the list through.
		x.rs.bm.TooLarge("answer")
		return nil, fmt.Errorf("%w: %w: %w", errBulk, batch.ErrApart, errAnswerTooLarge)
	case !ok && len(ids) == 1:
		e := ownAnswer(resp, body, t0)
		return []*bulkAnswer{{e: e, call: x.newBulkCall(resp.Header, out.Header, took), refused: true, private: httpcache.Private(e.Header)}}, nil
	case !ok:
		return nil, fmt.Errorf("%w: %w: status %d", errBulk, batch.ErrIsolate, resp.StatusCode)
	}
	// Room past each element for its ETag (keepElement), and for the
	// strings its entry keeps (setID).
	ex := x.elementExchange()
	// admit judges each element by what this call sent (sentWithout,
	// sentUnvaried), not by the route's rules when the answer comes: its
	// header, but for the Accept it sets itself (elementVary exempts it).
	// One copy per call, not per element.
	ex.sent = out.Header.Clone()
	delete(ex.sent, "Accept")
	frame := cachekey.NewFrame(ex.r, &rt.Key)
	parts, err := bulk.SplitForRoom(body, rt.Batch.IDField, ids, bulk.ETagLen+ex.elementRoom(ids, &frame))
	if cap(body) <= maxBulkBuf {
		// Nothing holds body past the split: the elements are
		// copies, an error's text too.
		*buf = body[:0]
		x.rs.bulkBufs.Put(buf)
	}
	switch {
	case errors.Is(err, bulk.ErrShape) && len(ids) > 1:
		return nil, fmt.Errorf("%w: %w: %w", errBulk, batch.ErrIsolate, err)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", errBulk, err)
	}
	res := make([]*bulkAnswer, len(ids))
	answers := make([]bulkAnswer, len(ids))
	call := x.newBulkCall(resp.Header, out.Header, took/time.Duration(len(ids)))
	heads := x.elementHeads(resp.Header, out.Header, t0)
	var tagArray [elementTags]string
	ex.sets = elementSetsPool.Get().(*elementSets)
	for i, id := range ids {
		elem, room := parts[i], []byte(nil)
		if n := len(elem); elem != nil {
			// The element, its ETag's room (bulk.ETagAfter) and past
			// them the room of its strings.
			elem, room = elem[:n:n+bulk.ETagLen], elem[n+bulk.ETagLen:n+bulk.ETagLen:cap(elem)]
		}
		tags := ex.setID(id, &frame, room, &tagArray)
		ex.sets.cur = i
		a := &answers[i]
		*a = ex.keepElement(ctx, elem, resp.Header, heads, t0, tags)
		a.call = call
		res[i] = a
	}
	ex.storeElements(ctx, answers, resp.Header)
	return res, nil
}

// ownAnswer is the entry for a one-id bulk call's failing answer, served to
// that id's waiters as the upstream gave it and never stored (TTL 0).
func ownAnswer(resp *http.Response, body []byte, requested time.Time) *cache.Entry {
	return &cache.Entry{Status: resp.StatusCode, Header: httpcache.StoredHeader(resp.Header), Body: body, StoredAt: requested}
}

// notFoundBody is the body of an id absent from the bulk answer.
var notFoundBody = []byte(`{"error":"not found"}`)

func notFoundEntry(now time.Time) *cache.Entry {
	return &cache.Entry{Status: http.StatusNotFound, StoredAt: now,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: notFoundBody}
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
