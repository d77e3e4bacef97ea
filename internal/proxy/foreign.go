package proxy

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"

	"github.com/sidecache/sidecache/internal/batch"
)

// A bulk call carries the headers of the request that opened its batch
// (fetchBulk, x.outgoing), X-Forwarded-For written from that client's
// address among them. Its elements are shared by every member of the
// batch when they can be (stored, or identical for every request the
// batch groups); an element that cannot — the bulk answer is private or
// sets a cookie (RFC 9111 §5.2.2.7, §7.3), or its Vary names a header
// the members may send differently (keepElement's reasons) — is an answer
// to the opener's request only (RFC 9111 §4.1: a response selected by
// Vary answers a request that matches it). Every other member then
// fetches its own, as a collapsed waiter of the per-key path does
// (exchange.join): a one-id request in a one-id bulk call of its own
// (fetchOwnID), a list its foreign ids in calls of its own within its
// call budget (fetchForeign). So the shareable case costs nothing more,
// and an answer made for one client never reaches another.

// madeFor reports whether a is an answer the bulk call made with the
// headers h of a client request: the same header map (a list request's
// per-ID exchanges share it: perIDRequest). Any other request, however
// alike, gets false: a private answer may carry what only the opener's
// request should see, and X-Forwarded-For (written per connection) is in
// no header map at all.
func (a *bulkAnswer) madeFor(h http.Header) bool {
	return a != nil && a.call != nil && sameHeader(a.call.from, h)
}

// notFor reports whether a, private or not, is no answer to the request
// whose header is h, which then fetches its own (flight.foreign): an
// answer private to another request (madeFor), or one made without a
// header h carries (withheldFrom).
func (a *bulkAnswer) notFor(private bool, h http.Header) bool {
	return a.withheldFrom(h) || private && !a.madeFor(h) // withheldFrom first: it teaches the route
}

// withheldFrom reports whether a was made with other values than h
// carries of a header its Vary names (bulkCall.vary): another variant
// than h's request's, opener or member (RFC 9111 §4.1), as the per-key
// path finds an answer made without a header the route withheld (fetch:
// sentWithout). It compares h with what the call sent (bulkCall.sent),
// never with what the route forwards or groups on now: a Vary learned
// after the call left (or a reload's fresh rules) changes those, and a
// member that joined the batch before could have been handed the variant
// of another tenant. The route learns a header h carried and the call
// withheld (the per-key path does so too), so that the request's own
// call carries it.
func (a *bulkAnswer) withheldFrom(h http.Header) bool {
	if a == nil || a.call == nil || len(a.call.vary) == 0 {
		return false
	}
	for _, n := range a.call.vary {
		if !slices.Equal(h[n], sentValues(a.call.sent, n)) {
			a.call.fwd.rules.LearnVary(h, a.call.vary)
			return true
		}
	}
	return false
}

// sentValues are the values of the (canonical) header n that a call with
// header sent carried upstream; nil: none. An empty User-Agent is upreq's
// mark that the client sent none, and is not sent (net/http, lean).
func sentValues(sent http.Header, n string) []string {
	vs := sent[n]
	if n == "User-Agent" && len(vs) == 1 && vs[0] == "" {
		return nil
	}
	return vs
}

// sameHeader reports whether a and b are one map (not merely equal).
func sameHeader(a, b http.Header) bool {
	return a != nil && b != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// RetryArg is the exchange the isolation retry of the lead's id is made
// with (batch.RetryArger): that one-id request's own call, so it carries
// the request's own headers and address (X-Forwarded-For), not the
// opener's. A private answer to it is then its own (madeFor), and the
// request makes no third call (fetchOwnID) past its budget of two: the
// shared call and its own. Called under the batcher's lock: a copy of
// the opener's exchange (route, state) aimed at the lead's request,
// without what only the opener's client has (its writer, access log
// record, 1xx relay, list account).
func (m *lead) RetryArg(opener *exchange) *exchange {
	if m.req == nil || sameHeader(m.req.Header, opener.r.Header) {
		return opener
	}
	c := *opener
	c.r, c.w, c.rec, c.interim, c.list, c.base, c.req = m.req, nil, nil, nil, nil, candidate{}, nil
	c.key, c.vnames, c.vcoding, c.vkey, c.sent = "", nil, "", "", nil
	return &c
}

// fetchOwnID is a batch route's miss fetched for this request alone
// (x.own: the flight's or the batch's answer was not for it): a one-id
// bulk call with its own headers, outside the batcher, so no other
// request's answer can be handed to it and its answer to no other. It is
// the second of the two calls a per-ID request may cost (docs: "Upstream
// call budget"). Its elements are kept as any bulk answer's: stored when
// shareable (as if this request had opened a batch of its own), else not.
func (x *exchange) fetchOwnID(ctx context.Context) (*flight, error) {
	id := x.params.Get(x.rs.rt.Batch.IDParam)
	res, err := x.ownBulk(ctx, []string{id})
	if err != nil {
		return batchedFlight(x.h.now, new(flight), nil, false, err)
	}
	return batchedFlight(x.h.now, new(flight), res[0], true, nil)
}

// fetchForeign fetches again, with the list's own headers, the ids of a
// list request whose batched answers were made for another request
// (flight.foreign), in ⌈m/max_size⌉ bulk calls paid from the list's call
// budget (batch.Loader.Spend). Each id's outcome is settled as a batched
// one is (part.settle: a stale copy for a failure, the list passed
// through for a record too large; batchFailed: 504 for a call that ran
// out of upstream.timeout). A list without calls left has failed
// for those ids (502 but for a stale copy), counted as a spent budget:
// never the other request's answer.
func (x *exchange) fetchForeign(ctx context.Context, parts map[string]*part) {
	var ids []string
	var px *exchange
	for id, p := range parts {
		if p.foreign {
			ids = append(ids, id)
			px = p.x
		}
	}
	if px == nil {
		return
	}
	fail := func(ids []string, err error) {
		ue := batchFailed(err) // a timeout's 504, as a batched id's
		for _, id := range ids {
			parts[id].settle(nil, ue) // split.go
		}
	}
	size := max(px.rs.rt.Batch.MaxSize, 1)
	calls := (len(ids) + size - 1) / size
	if !px.rs.batcher.Spend(px.list, calls) {
		px.rs.bm.BudgetExhausted(len(ids))
		fail(ids, fmt.Errorf("split: own call for ids answered for another request: %w", batch.ErrBudget))
		return
	}
	for len(ids) > 0 {
		chunk := ids[:min(size, len(ids))]
		ids = ids[len(chunk):]
		res, err := px.ownBulk(ctx, chunk)
		if err != nil {
			fail(chunk, err)
			continue
		}
		for i, id := range chunk {
			parts[id].settle(res[i].e, nil)
		}
	}
}

// ownBulk is a request's own bulk call, made outside the route's batches
// (fetchOwnID, fetchForeign) but within batch.max_route_in_flight with
// them (batch.Loader.Own): a batch of n members whose answer was private
// sent its n−1 members' own calls at once, past the route's bound. The
// request holds no slot while it waits: its batched answer has returned.
func (x *exchange) ownBulk(ctx context.Context, ids []string) (res []*bulkAnswer, err error) {
	if werr := x.rs.batcher.Own(ctx, len(ids), func() { res, err = x.fetchBulkTraced(ctx, ids) }); werr != nil {
		return nil, werr
	}
	return res, err
}
