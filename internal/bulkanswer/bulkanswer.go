// Package bulkanswer is one id's share of a batch route's bulk call: the
// element kept for it (or the upstream's own answer to a one-id call, or
// a 404 for an id the answer left out), the call it came from, and which
// client requests it may answer.
//
// A bulk call carries the headers of the request that opened its batch,
// X-Forwarded-For written from that client's address among them. Its
// elements are shared by every member of the batch when they can be
// (stored, or identical for every request the batch groups); an element
// that cannot — the bulk answer is private or sets a cookie (RFC 9111
// §5.2.2.7, §7.3), or its Vary names a header the members may send
// differently — is an answer to the opener's request only (RFC 9111
// §4.1: a response selected by Vary answers a request that matches it).
// NotFor tells every other member to fetch its own, as a collapsed waiter
// of the per-key path does, so an answer made for one client never
// reaches another.
//
// It also names how a bulk call fails (ErrBulk, ErrElementTooLarge,
// ErrAnswerTooLarge) and what each failure answers (Failed).
package bulkanswer

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sidecache/sidecache/internal/batch"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/forward"
	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/upfail"
)

// ErrBulk marks a failed bulk call. Its waiters answer 502 (504 when it
// ran out of upstream.timeout: Failed): a batch never hands out a body it
// could not attribute to an id with certainty.
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
// request (batch.ErrApart: ErrAnswerTooLarge).
var ErrBulk = errors.New("bulk call failed")

// ErrElementTooLarge is a one-id bulk call whose answer is over
// max_body_bytes: no upstream failure, a record too large to keep. Its
// requests pass through to the upstream, streamed and uncached, as a
// cached route's answer over the bound is; a 502 served it to no one, and
// cost an upstream call per request.
var ErrElementTooLarge = errors.New("element over max_body_bytes")

// ErrAnswerTooLarge is a bulk answer of several ids over max_body_bytes:
// the loader retries each request's ids apart (batch.ErrApart). It wraps
// ErrElementTooLarge, so a request it reaches still (a list whose own call
// it was) passes through to the upstream, as a record too large to keep
// does, and is never answered 502 for it.
var ErrAnswerTooLarge = fmt.Errorf("bulk answer over max_body_bytes: %w", ErrElementTooLarge)

// ErrUnattributed is an id a bulk answer holds no element for, while it
// holds elements whose ids are none the call asked for (strays): the
// upstream echoes ids in a spelling of its own (the slug 5-acme answered
// as 5, as Rails' find reads it; the UUID AB12… as ab12…, as PostgreSQL
// prints it), so the id is not known to be absent, and which stray is its
// element is the upstream's reading, not the sidecar's to guess. Its
// requests pass through to the upstream as the client sent them (a split
// list holding it, to the upstream's list), its own answer, nothing
// stored; a 404 was stored for a record the upstream has.
var ErrUnattributed = errors.New("bulk answer names no element for the id but elements for ids not asked")

// Passes reports whether err, an id's load's, sends its requests to the
// upstream as the clients sent them rather than failing them: a record
// too large to keep (ErrElementTooLarge), or an id its bulk answer could
// not be attributed to (ErrUnattributed). Either is the upstream's answer,
// no failure of it: no stale copy stands in for it.
func Passes(err error) bool {
	return errors.Is(err, ErrElementTooLarge) || errors.Is(err, ErrUnattributed)
}

// Failed is the answer to a batched miss whose load failed: 503 when the
// batcher refused it (its group's queue full, Retry-After set by the
// writer), 504 when its batch was not sent in time or its bulk call ran
// out of upstream.timeout, as any upstream timeout is (RFC 9110 §15.6.5: a
// healthy bulk endpoint on a loaded machine is slow, not broken), else
// 502 (a failed bulk call).
func Failed(err error) *upfail.Error {
	switch {
	case errors.Is(err, batch.ErrQueueFull):
		return &upfail.Error{Code: http.StatusServiceUnavailable, Err: err}
	case errors.Is(err, batch.ErrDeadline) || upfail.TimedOut(err):
		return &upfail.Error{Code: http.StatusGatewayTimeout, Err: err}
	}
	return &upfail.Error{Code: http.StatusBadGateway, Err: err}
}

// Answer is one id's share of a bulk call.
type Answer struct {
	E    *cache.Entry
	Call *Call // what every id of the call shares; nil: nothing
	// Refused: the upstream's own failing answer to a one-id call.
	Refused bool
	// Unattributed: the call's answer holds no element for the id, and
	// elements for ids not asked (ErrUnattributed); E is nil.
	Unattributed bool
	Stored       bool
	// Private: for the request whose headers made the call only (the
	// others fetch their own: MadeFor), judged once per id where the
	// answer is made: by the element's keeping (its reason, or admit's
	// Shareable, which reads the same header), for an own answer by its
	// header (httpcache.Private); the waiters' flights read the entry's
	// header again as well. Vary and VKey: the variant it is, when stored
	// as one.
	Private bool
	// Unstorable: the answer may not be stored for what it is, for the
	// lease of the id (the proxy's hit-for-pass on the cluster lease).
	Unstorable bool
	Vary       []string
	VKey       string
}

// Call is what the answers of one bulk call share, held once for all of
// them rather than copied into each (an answer is made per id).
type Call struct {
	Link trace.SpanContext // the bulk call's span, when traced
	// Upstream is each id's share of the bulk call's time (the call's
	// time over its ids), for the access log.
	Upstream time.Duration
	ReqID    string // the bulk call's X-Request-Id
	// from is the header of the client request whose headers the call
	// carried (its opener's; a one-id request's isolation retry carries
	// that request's; a list's, the opener's). An answer only that
	// request may have (private, or varying on a header the members may
	// send differently) goes to its requests alone: MadeFor.
	from http.Header
	// vary are the client headers the answer's Vary names (varyMatched)
	// and sent the call's own header: an element is the variant of the
	// values sent carried of them (absent ones included: a header the
	// route withheld until it learns it from a Vary,
	// forward.Rules.LearnVary), which answers no request that carried
	// other values (RFC 9111 §4.1), opener or member: WithheldFrom. The
	// call's record, never the route's rules, which may have changed
	// since it left (a Vary learned, or a reload) and, with them, what a
	// group holds. rules are the route's forwarding rules, which a request
	// with a withheld header teaches it, so that its own call carries it.
	vary  []string
	sent  http.Header
	rules *forward.Rules
}

// NewCall is what the answers of a bulk call share: made with the
// headers from of a client request and sent as out, its answer's header
// upstream, each id's share of its time took; rules are the route's, and
// never reports the headers the route never forwards.
func NewCall(from, upstream, out http.Header, took time.Duration, rules *forward.Rules, never func(string) bool) *Call {
	c := &Call{Upstream: took, ReqID: out.Get("X-Request-Id"), from: from}
	if _, varies := upstream["Vary"]; varies {
		c.vary, c.sent, c.rules = varyMatched(upstream, never), out, rules
	}
	return c
}

// varyMatched lists the headers upstream's Vary names that a request
// must match the bulk call in (WithheldFrom), but Accept-Encoding and
// Accept: the bulk call sends its own of those for every request of the
// batch, and the transport undoes the coding (internal/bulkelem's Vary);
// and but the headers the sidecar writes or never forwards: bulkelem's
// Vary makes such an answer the opener's alone (private, MadeFor).
func varyMatched(upstream http.Header, never func(string) bool) []string {
	names, _ := cachekey.ParseVary(upstream)
	var vary []string
	for _, n := range names {
		if n != "Accept-Encoding" && n != "Accept" && !forward.Own(n) && !never(n) {
			vary = append(vary, n)
		}
	}
	return vary
}

// MadeFor reports whether a is an answer the bulk call made with the
// headers h of a client request: the same header map (a list request's
// per-ID requests share it). Any other request, however alike, gets
// false: a private answer may carry what only the opener's request should
// see, and X-Forwarded-For (written per connection) is in no header map
// at all.
func (a *Answer) MadeFor(h http.Header) bool {
	return a != nil && a.Call != nil && SameHeader(a.Call.from, h)
}

// NotFor reports whether a, private or not, is no answer to the request
// whose header is h, which then fetches its own: an answer private to
// another request (MadeFor), or one made without a header h carries
// (WithheldFrom).
func (a *Answer) NotFor(private bool, h http.Header) bool {
	return a.WithheldFrom(h) || private && !a.MadeFor(h) // WithheldFrom first: it teaches the route
}

// WithheldFrom reports whether a was made with other values than h
// carries of a header its Vary names (Call.vary): another variant than
// h's request's, opener or member (RFC 9111 §4.1), as the per-key path
// finds an answer made without a header the route withheld. It compares h
// with what the call sent, never with what the route forwards or groups
// on now: a Vary learned after the call left (or a reload's fresh rules)
// changes those, and a member that joined the batch before could have
// been handed the variant of another tenant. The route learns a header h
// carried and the call withheld (the per-key path does so too), so that
// the request's own call carries it. Both sides are read as they go on
// the wire (forward.SentValues): the call's empty User-Agent sent none,
// and so would a member's own fetch for a member's empty one.
func (a *Answer) WithheldFrom(h http.Header) bool {
	if a == nil || a.Call == nil || len(a.Call.vary) == 0 {
		return false
	}
	for _, n := range a.Call.vary {
		if !slices.Equal(forward.SentValues(h, n), forward.SentValues(a.Call.sent, n)) {
			a.Call.rules.LearnVary(h, a.Call.vary)
			return true
		}
	}
	return false
}

// SameHeader reports whether a and b are one map (not merely equal).
func SameHeader(a, b http.Header) bool {
	return a != nil && b != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// Own is the entry for a one-id bulk call's failing answer, served to
// that id's waiters as the upstream gave it and never stored (TTL 0).
func Own(resp *http.Response, body []byte, requested time.Time) *cache.Entry {
	return &cache.Entry{Status: resp.StatusCode, Header: httpcache.StoredHeader(resp.Header), Body: body, StoredAt: requested}
}

// Refusal is a bulk call of several ids that the upstream refused in a
// way one of them may cause (a 4xx other than 408 and 429:
// bulk.Isolable): it fails the call as Err says (ErrBulk, and
// batch.ErrIsolate, so the loader isolates its ids), and keeps the
// upstream's own answer, with the call's ids and the header of the client
// request whose headers the call carried, for ListRefusal.
type Refusal struct {
	Err  error
	e    *cache.Entry
	ids  []string
	from http.Header
}

// NewRefusal is the refusal of the call of ids made with the headers from
// of a client request, err its failure; resp and body are the upstream's
// answer to it, which left at requested.
func NewRefusal(err error, resp *http.Response, body []byte, requested time.Time, ids []string, from http.Header) *Refusal {
	return &Refusal{Err: err, e: Own(resp, body, requested), ids: slices.Clone(ids), from: from}
}

func (r *Refusal) Error() string { return r.Err.Error() }
func (r *Refusal) Unwrap() error { return r.Err }

// ListRefusal is the upstream's own answer that refuses a split list
// request whose header is h, when err, the failure of one of its ids, is
// a call's Refusal (however it reached the id: an isolation whose calls
// the list's budget could not pay, batch.ErrBudget, or its own call for
// ids answered for another request) and that call was the list's alone:
// made with the list's headers, of ids it lists (listed) only. That
// answer refuses a query of the list's ids with its headers; the app's
// list endpoint refuses the whole list with such an answer too (an id it
// refuses is refused in any list: splitpart's Join), so the list is
// answered with it, never stored, as it is with an id's refusal alone —
// rather than 502, which it answered when its budget ran out before the
// isolation got down to one id (a list of one good id and 39 bad ones, or
// of 1 and 999: the upstream called directly answers 400). Nil otherwise:
// a call another request's ids or headers shared refused for what may be
// that request's fault, which fails none of this list's ids but its own
// (isolation).
func ListRefusal(err error, h http.Header, listed func(id string) bool) *cache.Entry {
	var r *Refusal
	if err == nil || !errors.As(err, &r) || !SameHeader(r.from, h) {
		return nil
	}
	for _, id := range r.ids {
		if !listed(id) {
			return nil
		}
	}
	return r.e
}

// notFoundBody is the body of an id absent from the bulk answer: a
// constant, so nothing can write to it.
const notFoundBody = `{"error":"not found"}`

// NotFoundBody is the body of an id absent from the bulk answer, a copy
// of its own for each entry: an entry's body is handed on (stored in L1,
// written, appended to a list's answer, its spare capacity used for an
// ETag: bulk.ETagAfter), and one shared slice, written or appended to in
// place once, was every later 404's body.
func NotFoundBody() []byte { return []byte(notFoundBody) }

// NotFound is the entry of an id absent from the bulk answer, at now.
func NotFound(now time.Time) *cache.Entry {
	return &cache.Entry{Status: http.StatusNotFound, StoredAt: now,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: NotFoundBody()}
}
