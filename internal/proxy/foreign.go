package proxy

import (
	"context"
	"fmt"

	"github.com/sidecache/sidecache/internal/batch"
	"github.com/sidecache/sidecache/internal/bulkanswer"
)

// A bulk call's answer that may not be shared (internal/bulkanswer:
// private to its opener, or made without a header another request
// carries) is fetched again by every other member of the batch, as a
// collapsed waiter of the per-key path does (exchange.join): a one-id
// request in a one-id bulk call of its own (fetchOwnID), a list its
// foreign ids in calls of its own within its call budget (fetchForeign).
// So the shareable case costs nothing more, and an answer made for one
// client never reaches another.

// RetryArg is the exchange the isolation retry of the lead's id is made
// with (batch.RetryArger): that one-id request's own call, so it carries
// the request's own headers and address (X-Forwarded-For), not the
// opener's. A private answer to it is then its own
// (bulkanswer.Answer.MadeFor), and the request makes no third call
// (fetchOwnID) past its budget of two: the shared call and its own. Called under the batcher's lock: a copy of
// the opener's exchange (route, state) aimed at the lead's request,
// without what only the opener's client has (its writer, access log
// record, 1xx relay, list account).
func (m *lead) RetryArg(opener *exchange) *exchange {
	if m.req == nil || bulkanswer.SameHeader(m.req.Header, opener.r.Header) {
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
// one is (splitpart.Part.Settle: a stale copy for a failure, the list
// passed through for a record too large; bulkanswer.Failed: 504 for a
// call that ran out of upstream.timeout). A list without calls left has failed
// for those ids (502 but for a stale copy), counted as a spent budget:
// never the other request's answer.
func (x *exchange) fetchForeign(ctx context.Context, parts listParts) {
	var ids []string
	var px *exchange
	for id, p := range parts {
		if p.Foreign {
			ids = append(ids, id)
			px = p.X
		}
	}
	if px == nil {
		return
	}
	fail := func(ids []string, err error) {
		if ref := bulkanswer.ListRefusal(err, px.r.Header, parts.Has); ref != nil {
			for _, id := range ids {
				parts[id].Settle(ref, nil) // the list's own call refused: so is the list
			}
			return
		}
		ue := bulkanswer.Failed(err) // a timeout's 504, as a batched id's
		for _, id := range ids {
			parts[id].Settle(nil, ue)
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
			if res[i].Unattributed {
				parts[id].Settle(nil, bulkanswer.ErrUnattributed)
				continue
			}
			parts[id].Settle(res[i].E, nil)
		}
	}
}

// ownBulk is a request's own bulk call, made outside the route's batches
// (fetchOwnID, fetchForeign) but within batch.max_route_in_flight with
// them (batch.Loader.Own): a batch of n members whose answer was private
// sent its n−1 members' own calls at once, past the route's bound. The
// request holds no slot while it waits: its batched answer has returned.
func (x *exchange) ownBulk(ctx context.Context, ids []string) (res []*bulkanswer.Answer, err error) {
	if werr := x.rs.batcher.Own(ctx, len(ids), func() { res, err = x.fetchBulkTraced(ctx, ids) }); werr != nil {
		return nil, werr
	}
	return res, err
}
