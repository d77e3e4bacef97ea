package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sidecache/sidecache/internal/bulkanswer"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/upfail"
)

// Revalidation (RFC 9111 §4.3): a stale entry that carries a validator
// (ETag or Last-Modified) is not fetched again whole. The fill that would
// fetch it sends a conditional request instead, and a 304 answer refreshes
// the stored entry — its header updated from the 304 (§4.3.4), its
// freshness computed anew — without the body crossing the wire again. Both
// freshness modes do this; entries with a validator are kept past their
// freshness for the revalidation window (see httpcache.KeepFor) so that there is
// something to revalidate.

// validatable returns c when it may be revalidated for x's request: a
// stored response (not a marker) with a validator, still held by the
// tiers, of x's variant, in an encoding x accepts, not invalidated since.
// Otherwise the zero candidate.
func (x *exchange) validatable(c candidate) candidate {
	if c.e == nil || c.e.IsVariants() || c.e.ETag() == "" && !httpcache.HasValidator(c.e.Header) ||
		c.e.Remaining(x.h.now()) == 0 || !x.answers(c, needAny) {
		return candidate{}
	}
	return c
}

// addConditional makes out a conditional request for the entry being
// revalidated (httpcache.AddConditional).
func (x *exchange) addConditional(out *http.Request) {
	if x.base.e != nil {
		httpcache.AddConditional(out.Header, x.base.e.FullHeader())
	}
}

// refreshed handles the origin's 304 to a conditional request: the stored
// response, with each header field the 304 carries replacing the stored
// one (§4.3.4; hop-by-hop fields and those of the stored body itself,
// Content-Encoding, Content-Type, Content-Length, Content-Range, excepted:
// §3.2, httpcache.Freshen), is
// admitted and stored again as if just fetched — so its freshness, Age and
// request time are the 304's.
//
// A 304 whose strong entity tag is not the stored one confirms another
// response than the one held (§4.3.4: no stored response is selected); the
// fetch is then made once more, unconditionally, if the request's call
// budget allows it (overBudget); otherwise the request is answered 502.
func (x *exchange) refreshed(ctx context.Context, notModified http.Header, requested time.Time, took time.Duration) (*flight, error) {
	b := x.base.e
	stored := b.FullHeader()
	if !httpcache.Confirms(notModified, stored) {
		x.base = candidate{}
		if err := x.overBudget("revalidate: 304 confirms another response"); err != nil {
			return nil, err
		}
		return x.fetch(ctx)
	}
	merged, update := httpcache.Freshen(stored, notModified)
	x.h.tagh.CarryOver(merged, update, b.Tags)
	// Its body may be a slice of the L2 reply it was read from: the entry
	// stored again holds a copy (Entry.OwnBody).
	f := x.keep(ctx, b.Status, merged, b.OwnBody(), requested)
	f.revalidated, f.upstream = true, took
	return f, nil
}

// callBudget is the most upstream calls fetch makes for one client request
// (README, "Budget"; ARCHITECTURE's bound on upstream calls per client
// request): its fetch and one more — after a 304 that confirms another
// response than the one held (refreshed), or to send a header the answer's
// Vary names that the fetch did not carry (fetch). Both may be wanted by
// one request (a 304 with a mismatched validator, then an answer that
// varies on a header not sent): the second wish finds the budget spent.
const callBudget = 2

// overBudget is the failure of a request that would need a third upstream
// call, why being the wish: a 502, as NGINX answers when
// proxy_next_upstream_tries is spent, rather than an answer that is not
// this request's. It is nil while the request may call once more.
func (x *exchange) overBudget(why string) error {
	if x.calls < callBudget {
		return nil
	}
	return &upfail.Error{Code: http.StatusBadGateway, Err: fmt.Errorf("%s: upstream call budget of %d spent", why, callBudget)}
}

// mustRevalidateError is the error a fill answers with when the upstream
// could not be reached while it revalidated a stale entry the origin
// forbade serving stale (must-revalidate, proxy-revalidate, s-maxage,
// no-cache): RFC 9111 §5.2.2.2 says the cache MUST generate an error and it
// SHOULD be 504 Gateway Timeout, so a refused or reset connection answers
// 504 here rather than the 502 it gets otherwise (docs/configuration.md,
// "Freshness from the origin"). An answer the upstream did give, even a
// 5xx, is relayed as it is: that is not a disconnection; nor does a failed
// bulk call change (the SPEC's 502 for every waiter of a batch).
func (x *exchange) mustRevalidateError(err error) error {
	return mustRevalidateError(x.base.e, err)
}

// mustRevalidateError is the method's rule for a fill whose stored entry
// to revalidate was base (nil: none).
func mustRevalidateError(base *cache.Entry, err error) error {
	if base == nil || !base.NoStale || errors.Is(err, bulkanswer.ErrBulk) {
		return err
	}
	if ue := upfail.Classify(err); ue.Code == http.StatusGatewayTimeout {
		return ue
	}
	return &upfail.Error{Code: http.StatusGatewayTimeout, Err: fmt.Errorf("revalidate: stale entry may not be served: %w", err)}
}
