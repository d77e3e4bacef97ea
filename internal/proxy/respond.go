package proxy

import (
	"net/http"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cachestatus"
	"github.com/sidecache/sidecache/internal/entrywrite"
	"github.com/sidecache/sidecache/internal/largebody"
	"github.com/sidecache/sidecache/internal/metrics"
	"github.com/sidecache/sidecache/internal/upfail"
)

// status is this cache's RFC 9211 Cache-Status member (internal/cachestatus
// makes its wire form, the common ones once).
type status = cachestatus.Member

// outcome is how the proxy answered one request. It alone decides the
// fixed part of the Cache-Status member and the metrics result.
type outcome uint8

const (
	outHit             outcome = iota // a fresh entry from L1 or L2
	outStaleRevalidate                // stale within stale-while-revalidate; one refresh started
	outStaleError                     // stale within stale-if-error; the upstream failed
	outMiss                           // fetched from the upstream by this request
	outCollapsed                      // answered by another request's fetch
	outBypass                         // the request may not use the cache
	outPass                           // no route, or a route that caches nothing
	outWrite                          // an unsafe method, forwarded
	outTooLarge                       // a body over max_body_bytes, streamed through
	outError                          // the upstream failed and nothing stale fits
	outRevalidated                    // a stale entry the upstream confirmed with a 304
)

// outcomes is the one table from outcome to Cache-Status (RFC 9211 §2) and
// sidecache_requests_total's result.
var outcomes = [...]struct {
	result    metrics.Result
	hit       bool
	fwd       string
	collapsed bool
	detail    string
	fromCache bool // Age and ttl are reported
}{
	outHit:             {result: metrics.Hit, hit: true, fromCache: true},
	outStaleRevalidate: {result: metrics.Stale, fwd: "stale", detail: "stale-while-revalidate", fromCache: true},
	outStaleError:      {result: metrics.Stale, fwd: "stale", detail: "stale-if-error", fromCache: true},
	outMiss:            {result: metrics.Miss, fwd: "miss"},
	outCollapsed:       {result: metrics.Collapsed, fwd: "miss", collapsed: true},
	outBypass:          {result: metrics.Bypass, fwd: "bypass"},
	outPass:            {result: metrics.Pass, fwd: "bypass"},
	outWrite:           {result: metrics.Pass, fwd: "method"},
	outTooLarge:        {result: metrics.Pass, fwd: "miss", detail: "too-large"},
	outError:           {result: metrics.Miss, fwd: "miss", detail: "upstream-error"},
	outRevalidated:     {result: metrics.Miss, fwd: "stale", fromCache: true},
}

// status is the Cache-Status member for outcome o; e (may be nil) is the
// entry served, fwdStatus the upstream's status when one was asked.
func (x *exchange) status(o outcome, e *cache.Entry, fwdStatus int) status {
	return x.statusAt(o, e, fwdStatus, time.Time{})
}

// statusAt is status with the clock already read (now; zero: read it when
// needed), by a caller that judged e by it: the member's ttl is then
// counted from the instant e was judged fresh at.
func (x *exchange) statusAt(o outcome, e *cache.Entry, fwdStatus int, now time.Time) status {
	row := outcomes[o]
	s := status{Hit: row.hit, Fwd: row.fwd, Collapsed: row.collapsed, Detail: row.detail, FwdStatus: fwdStatus}
	if x.refresh && s.Fwd == "miss" {
		s.Fwd = "request" // a stored response was not allowed (RFC 9211 §2.2)
	}
	if row.fromCache && e != nil {
		s.HasTTL = true
		if now.IsZero() {
			now = x.h.now()
		}
		s.TTL = e.TTL - e.Age(now) // negative once stale
	}
	return s
}

// respondEntry answers from a stored candidate.
func (x *exchange) respondEntry(o outcome, c candidate, fwdStatus int) {
	x.respondEntryAt(o, c, fwdStatus, time.Time{})
}

// respondEntryAt is respondEntry by a caller that read the clock to judge
// c (now; zero: none): an L2 hit's flight read it once to know the entry
// fresh and once more for its Cache-Status ttl.
func (x *exchange) respondEntryAt(o outcome, c candidate, fwdStatus int, now time.Time) {
	s := x.statusAt(o, c.e, fwdStatus, now)
	if o == outHit {
		s.Detail = string(c.tier)
	}
	x.respond(o, c.e, s)
}

// respondHeld answers an upstream failure with the copy held for it
// (stale-if-error). A copy still fresh (a forced refresh's, or the one the
// L2 read after the failure found, which another replica stored
// meanwhile) is not stale: its member says why the request went forward
// (miss, request) beside its ttl ≥ 0, never fwd=stale with a positive ttl
// (RFC 9211 §2.2: fwd=stale is a stale stored response; §2.4).
func (x *exchange) respondHeld(held candidate, fwdStatus int) {
	now := x.h.now()
	s := x.statusAt(outStaleError, held.e, fwdStatus, now)
	if held.e.Fresh(now) {
		s.Fwd = "miss"
		if x.refresh {
			s.Fwd = "request" // a stored response was not allowed (§2.2)
		}
	}
	x.respond(outStaleError, held.e, s)
}

// respondFlight answers with a flight's result: a hit (or a stale hit) when
// the flight found the entry in a tier, else a miss or a collapsed miss.
func (x *exchange) respondFlight(f *flight, leader bool) {
	if f.c.tier != "" {
		now := x.h.now()
		if f.c.e.Fresh(now) {
			x.respondEntryAt(outHit, f.c, 0, now)
			return
		}
		x.revalidate(f.c)
		x.respondEntry(outStaleRevalidate, f.c, 0)
		return
	}
	o, fwdStatus := outMiss, f.c.e.Status
	if f.revalidated {
		o, fwdStatus = outRevalidated, http.StatusNotModified
	}
	if !leader {
		o = outCollapsed
		x.rs.m.Coalesced()
	}
	s := x.status(o, f.c.e, fwdStatus)
	s.Stored = f.stored
	if f.batched {
		s.Detail = "batch"
	}
	x.respond(o, f.c.e, s)
}

// count records the request's result in the route's metrics and, with
// the access log on, in its record, so that the log's route and result are
// the metrics' labels (_pass, pass), not the Cache-Status spelling.
func (x *exchange) count(r metrics.Result) {
	x.rs.m.Request(r, x.h.now().Sub(x.start))
	if x.rec != nil {
		x.rec.Route, x.rec.Result = x.rs.m.Name(), string(r)
	}
}

// respond writes an entry with its Cache-Status member and counts the
// request under the outcome's result.
func (x *exchange) respond(o outcome, e *cache.Entry, s status) {
	x.writeEntry(e, s, outcomes[o].fromCache)
	x.count(outcomes[o].result)
}

// fail answers an upstream failure that no stale copy could cover.
func (x *exchange) fail(err error) {
	s := x.status(outError, nil, 0)
	ue := upfail.Classify(err)
	x.h.logUpstream(x.r, x.rs.m.Name(), ue.Code, err)
	x.writeFailure(ue, s)
	x.count(outcomes[outError].result)
}

// writeEntry answers from an entry (internal/entrywrite): fromCache, it
// was stored, and Age and ttl are reported.
func (x *exchange) writeEntry(e *cache.Entry, st status, fromCache bool) {
	entrywrite.Write(x.w, x.r, e, st, fromCache, &x.h.ew)
}

// streamLarge answers the client whose request fetched a response too large
// to keep (largebody.Body.Stream). When the body is no longer there to
// claim (the grace period ended), it passes through with a fetch of its
// own. A body broken off aborts the client's connection (RFC 9112 §8).
func (x *exchange) streamLarge(l *largebody.Body) {
	if !l.Claim() {
		x.pass(outTooLarge, "")
		return
	}
	s := x.status(outTooLarge, nil, l.Resp.StatusCode)
	err := l.Stream(x.w, x.r, s.String(), &x.h.large)
	x.count(outcomes[outTooLarge].result)
	if err != nil && x.r.Context().Value(http.ServerContextKey) != nil {
		panic(http.ErrAbortHandler) // the upstream's body closed
	}
}
