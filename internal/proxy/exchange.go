package proxy

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/sidecache/sidecache/internal/accesslog"
	"github.com/sidecache/sidecache/internal/batch"
	"github.com/sidecache/sidecache/internal/bulkanswer"
	"github.com/sidecache/sidecache/internal/bulkelem"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/coalesce"
	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/redisbudget"
	"github.com/sidecache/sidecache/internal/relay"
	"github.com/sidecache/sidecache/internal/route"
)

// exchange is one client request on its way through the proxy: what
// classify decided, carried to every later stage so that none of them needs
// more than a couple of arguments.
type exchange struct {
	h      *Handler
	st     *state
	rs     *routeState
	w      http.ResponseWriter
	r      *http.Request
	params params
	key    string // the cache key (cached path only)
	// uriTag is surrogate.URITagPrefix followed by r.URL.Path, when setID
	// built the two in one string (an element of a bulk answer; tagEntry
	// then takes the URI tag from it); "" otherwise.
	uriTag string
	start  time.Time
	rec    *accesslog.Record // nil unless the access log is on
	// arrival stamps a forced refresh's arrival (coalesce.Ordered); 0
	// for every other request.
	arrival uint64
	// emptyAt is 1 + the count of finished flights (coalesce.Group's
	// Finished) read before the request's L1 lookup, when that lookup
	// found nothing under the key; 0 otherwise. A leader's fill then
	// skips L1 while the count has not moved (fillCached).
	emptyAt uint64
	// refresh: the client asked not to be served a stored response
	// (no-cache, on a route that honours it), or this is a background
	// revalidation. (With own and retried: the flags sit together, as a
	// flight's lead copies the exchange; see flight.)
	refresh bool
	// own: fetch for this client alone, skipping the lookups and the
	// cluster lease (the flight's answer was not for it).
	own bool
	// retried: fetched once more after learning a Vary'd header.
	retried bool
	// calls counts the upstream calls fetch made for this request: a
	// fetch again (a 304 confirming another response, a Vary'd header
	// learned) is made only within callBudget (revalidate.go).
	calls uint8
	// sent is the header of the upstream request whose answer is being
	// judged (fetch sets it): an answer is judged by what its fetch
	// carried, not by what the route forwards by the time it arrives.
	sent http.Header
	// base is a stored entry the fetch revalidates (revalidate.go).
	base candidate
	// req memoises the request's directives (request.go).
	req *httpcache.Directives
	// vnames, vcoding and vkey memoise the variant key (see variantKey).
	vnames  []string
	vcoding string
	vkey    string
	// interim relays the upstream's 1xx to this client (interim.go).
	interim *relay.Interim
	// gate counts the 1xx the lean pass-through relays (passloop.go).
	gate relay.Gate
	// list is the client request's account with the batcher when it is a
	// list of ids (split.go); nil for a request of one id.
	list *batch.Requester
	// sets, while not nil, take the writes keepAs makes: an
	// elementExchange's, for storeElements to make together.
	sets *bulkelem.Sets
}

// cached is the cached path for a GET or HEAD: answer from L1 when an entry
// fits, otherwise join (or lead) the one flight for the key and respond
// with what it produced.
func (x *exchange) cached() {
	x.refresh = x.rs.rt.RefreshOnRequest && (httpcache.RefreshRequested(x.r) || httpcache.MaxAgeZero(x.r))
	if !x.refresh && x.rs.rt.Origin != nil && x.directives().OnlyIfCached {
		x.onlyIfCached()
		return
	}
	var held candidate // a stale copy, kept for stale-if-error
	flightKey := x.key
	ctx := x.r.Context()
	if x.refresh {
		// A forced refresh joins only one that started after it arrived
		// (join), so the arrival is stamped before anything else.
		x.arrival = x.h.refreshes.Arrive()
		flightKey += "\x00refresh"
		ctx = redisbudget.New(ctx) // this read and the flight's share it (join)
		// RFC 5861 §4: a stale-if-error copy answers an upstream failure
		// "regardless of other freshness information" — the request's
		// no-cache included.
		c := x.lookup(ctx, false)
		if x.answers(c, needIfError) {
			held = c
		}
		// max-age=0 (§5.2.1.1) takes a stored response once validated:
		// with a validator that refresh is conditional, and a 304 renews
		// it. no-cache and Pragma fetch the whole answer again (SPEC).
		if !httpcache.RefreshRequested(x.r) {
			x.base = x.validatable(c)
		}
	} else {
		finished := x.h.flights.Finished() // before the lookup: see emptyAt
		c := x.lookup(ctx, true)
		if c.e == nil && c.vary == nil {
			x.emptyAt = finished + 1
		}
		switch {
		case x.answers(c, needFresh):
			x.respondEntry(outHit, c, 0)
			return
		case x.answers(c, needRevalidate):
			x.revalidate(c)
			x.respondEntry(outStaleRevalidate, c, 0)
			return
		case x.answers(c, needIfError):
			held = c
		}
		if len(c.vkey) > x.h.maxKey {
			// The request selects a variant whose key is over
			// max_key_bytes: it passes through, as a long primary key does.
			x.pass(outBypass, "key-too-long")
			return
		}
		if c.vkey != "" {
			flightKey = c.vkey
		}
	}
	x.join(ctx, flightKey, held)
}

// join runs or joins the flight for flightKey and responds with its result,
// applying the fit rule to whatever the flight hands back.
//
// Every Redis call the request waits on from here — the flight's L2 read,
// its lease and lease wait, its batch, a stale copy's read after the
// upstream failed, a fetch of its own — shares one Redis budget of
// l2.redis.timeout (internal/redisbudget): the flight's calls are made
// under its leader's. The leader's budget is made with its flight, in the
// same allocation, and the flight's context carries it
// (coalesce.Flight.Carry): a context of its own (redisbudget.New) was one
// allocation more per L2 hit and per batched miss (issue 23). A request
// whose context has a budget already (an id of a list request: split.go;
// a forced refresh: cached) charges that one. The calls the request makes
// itself after the flight take the same budget (own), or a fresh one for
// a waiter, whose flight's calls were its leader's. An L1 hit never gets
// this far, and allocates none.
func (x *exchange) join(ctx context.Context, flightKey string, held candidate) {
	var (
		f      *flight
		leader bool
		err    error
		led    *redisbudget.Budget // the budget made with the flight this request leads
	)
	// own is ctx with the request's budget, for the calls it makes after
	// its flight: made on those paths only (a failure, an answer not for
	// it), never on a hit's.
	own := func(ctx context.Context) context.Context {
		if led != nil {
			return redisbudget.With(ctx, led)
		}
		return redisbudget.New(ctx)
	}
	if x.arrival != 0 {
		// A forced refresh: at most one per key in flight on this
		// replica, and never one that started before this request
		// arrived (coalesce.Ordered), so a flood of no-cache costs the
		// upstream one call at a time per key.
		ctx = redisbudget.New(ctx) // cached's, made for its read
		x.relayInterim()
		f, leader, err = x.h.refreshes.Do(ctx, flightKey, x.arrival, x.detach().fillTraced)
	} else {
		// A request that may be a batched miss holds its flight in its
		// lead, made only if it leads; others in a leaderFlight. Either
		// holds the request's budget and a tier's answer (fillFirst).
		// The lead is handed to fillFirst here rather than in a field of
		// the exchange: 8 bytes more took every copy of it (detach, one
		// per id of a list request) to a larger size class. fillFirst
		// opens the relay when its flight goes on to the upstream (an L2
		// hit, a waiter need none), before the copy of x the fetch runs on.
		fresh := redisbudget.From(ctx) == nil
		var m *lead
		var hit *flight // where a tier's answer goes (fillFirst)
		var in func() *coalesce.Flight[*flight]
		if x.h.tr == nil && x.batched() {
			in = func() *coalesce.Flight[*flight] {
				m = new(lead)
				if fresh {
					led = &m.budget
					m.fl.Carry(led)
				}
				hit = &m.f
				return &m.fl
			}
		} else {
			in = func() *coalesce.Flight[*flight] {
				l := new(leaderFlight)
				if fresh {
					led = &l.budget
					l.fl.Carry(led)
				}
				hit = &l.f
				return &l.fl
			}
		}
		first := func(ctx context.Context, fl *coalesce.Flight[*flight]) (*flight, coalesce.Next[*flight], error) {
			return x.fillFirst(ctx, fl, m, hit)
		}
		f, leader, err = x.h.flights.DoThenIn(ctx, flightKey, in, first) // copies x when it misses
	}
	x.interim.Close()
	if ctx.Err() != nil {
		return // the client left while waiting; the flight goes on for others
	}
	x.noteUpstream(f, leader)
	x.linkFlight(f, leader)
	if err == nil && f.large == nil && (!leader && !x.answers(f.c, f.need()) || leader && f.foreign) {
		// Not for this client: private, another variant, an encoding it
		// does not accept; or, to a batched miss that leads its flight, a
		// private answer of a bulk call that carried another request's
		// headers (flight.foreign). It fetches on its own, outside any
		// flight.
		x.own = true
		if x.interim == nil {
			x.relayInterim().Close() // a closed relay, as every own fetch had
		}
		ctx = own(ctx)
		f, err = x.detach().fill(context.WithoutCancel(ctx))
		leader = true
		x.noteUpstream(f, leader)
	}
	if errors.Is(err, bulkanswer.ErrElementTooLarge) {
		x.pass(outTooLarge, "") // batch.go
		return
	}
	if errors.Is(err, bulkanswer.ErrUnattributed) {
		x.pass(outBypass, "bulk-spelling") // batch.go
		return
	}
	if err == nil && f.large != nil {
		// An answer too large to keep is never judged by answers: it
		// goes only to the client whose request fetched it (it may be
		// private, carry that client's Set-Cookie or a coding only it
		// accepts); every other client of the flight passes through
		// with its own fetch.
		if leader {
			x.streamLarge(f.large)
		} else {
			x.pass(outTooLarge, "")
		}
		return
	}
	failed := err != nil || f.c.e.Status >= 500
	if held.e == nil && f != nil && f.stale != nil && x.answers(*f.stale, needIfError) {
		held = *f.stale
	}
	if failed && held.e == nil && !x.refresh && (!leader || x.own) {
		// The flight's stale copy, if any, is its leader's variant; this
		// request looked up only L1 (a forced refresh looked up both
		// tiers in cached), and its own fetch none: its own variant may
		// still sit stale in L2. One read, only when the upstream failed.
		if c := x.lookup(own(ctx), false); x.answers(c, needIfError) {
			held = c
		}
	}
	if failed && held.e != nil {
		fwdStatus := 0
		if err == nil {
			fwdStatus = f.c.e.Status
		}
		x.respondHeld(held, fwdStatus)
		return
	}
	if err != nil {
		x.fail(err)
		return
	}
	x.respondFlight(f, leader)
}

// noteUpstream adds to the access log the upstream time of a flight this
// request ran itself (a waiter's is the leader's to report), and the
// request id of the upstream call whose answer it got (a waiter's too).
func (x *exchange) noteUpstream(f *flight, leader bool) {
	if x.rec == nil || f == nil {
		return
	}
	if leader {
		x.rec.Upstream += f.upstream
	}
	if f.reqID != "" {
		x.rec.UpstreamRequestID = f.reqID
	}
}

// detach is the exchange a flight runs with: a copy, so the flight may
// outlive the request's own stack frame (and the L1-hit path keeps its
// exchange on the stack).
func (x *exchange) detach() *exchange {
	c := *x
	return &c
}

// revalidate starts one background refresh of a stale entry (RFC 5861 §3),
// collapsed with any refresh or miss already under way for the key. It runs
// whichever tier the stale copy came from.
func (x *exchange) revalidate(c candidate) {
	flightKey := x.key + "\x00refresh"
	if c.vkey != "" {
		flightKey = c.vkey + "\x00refresh"
	}
	if _, running := x.h.refreshing.LoadOrStore(flightKey, struct{}{}); running {
		return // one background refresh per key is enough
	}
	if x.replacedLocally(c) {
		x.h.refreshing.Delete(flightKey)
		return
	}
	bg := x.detach()
	bg.r = x.r.Clone(context.WithoutCancel(x.r.Context()))
	bg.refresh = true
	bg.base = bg.validatable(c)
	go func() {
		defer bg.h.refreshing.Delete(flightKey)
		_, _, _ = bg.h.flights.Do(bg.r.Context(), flightKey, bg.fillTraced)
	}()
}

// replacedLocally reports whether c, a stale copy this request read from
// L1, has been replaced there by a newer one since: a refresh that ended
// between this request's read and its revalidate stored it and dropped its
// marker from h.refreshing, so the marker alone let a second refresh start
// and cost the upstream a call for an entry already fresh (one in a few
// hundred bursts of stale hits under -race). One more L1 read, counted as
// any lookup, on the path that starts a refresh only.
func (x *exchange) replacedLocally(c candidate) bool {
	if c.tier != cache.TierL1 || c.e == nil {
		return false
	}
	key := x.key
	if c.vkey != "" {
		key = c.vkey
	}
	e, _, err := x.h.cache.LookupLocal(x.r.Context(), key)
	return err == nil && e != nil && e.StoredAt.After(c.e.StoredAt)
}

// variantKey is the key of the variant this request selects among the
// responses stored under a Vary of names (RFC 9111 §4.1), with
// Accept-Encoding normalised to the coding the sidecar would choose for it
// (cachekey.VariantCoding).
func (x *exchange) variantKey(names []string) string {
	return x.variantKeyIn(names, cachekey.VariantCoding(x.r.Header["Accept-Encoding"], x.rs.fwd.rules.Codings()))
}

// variantKeyIn is the key of the variant in coding that this request's
// other Vary'd headers select: where a response in that coding is stored
// (keep), and the key a stored one must have to answer this request.
func (x *exchange) variantKeyIn(names []string, coding string) string {
	if len(names) == 0 {
		return x.key
	}
	if !slices.Contains(names, "Accept-Encoding") {
		coding = ""
	}
	if x.vkey == "" || x.vcoding != coding || !slices.Equal(x.vnames, names) {
		x.vnames, x.vcoding, x.vkey = names, coding, cachekey.WithVary(x.key, names, x.r.Header, coding)
	}
	return x.vkey
}

// entryCoding is the coding of a stored or fetched response as a variant
// key names it; ok is false for one no variant names.
func entryCoding(e *cache.Entry) (string, bool) {
	return cachekey.CodingOf(e.Header)
}

// params are an exchange's route params. A route of one (the usual
// /users/{id}, a batch route's) keeps it in the exchange itself: the
// request's exchange lives on its stack on an L1 hit, and a slice of the
// matcher's there would follow every copy of it (detach, lead) to the
// heap, so matching cost an allocation per request. Copies of the
// exchange copy them. Room for one only: the exchange then fits its
// 384-byte size class (TestLeadAndExchangeSizes).
type params struct {
	n    int
	in   [1]route.Param
	more route.Params // when there are more than len(in)
}

// set keeps ps, which it does not retain.
func (p *params) set(ps route.Params) {
	if len(ps) > len(p.in) {
		p.n, p.more = 0, slices.Clone(ps)
		return
	}
	p.n, p.more = copy(p.in[:], ps), nil
}

// list is the params; it points into p unless there are more than
// len(p.in).
func (p *params) list() route.Params {
	if p.more != nil {
		return p.more
	}
	return p.in[:p.n:p.n]
}

// Get returns the value of the named param, or "".
func (p *params) Get(name string) string { return p.list().Get(name) }

// candidate is an entry together with the variant it is: the key it is
// stored under and the request headers that selected it. The fit rule needs
// both to tell whether it answers another request.
type candidate struct {
	e    *cache.Entry
	tier cache.Tier // "" when fetched from the upstream
	vkey string     // "" when the response does not vary
	vary []string
	// private: fetched for one client only (RFC 9111 §3, §5.2.2.7); never
	// stored, and never handed to a collapsed waiter.
	private bool
}
