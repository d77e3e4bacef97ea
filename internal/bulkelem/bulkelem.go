// Package bulkelem works out what the elements of one bulk answer share
// as a batch route keeps them, each as a per-ID fetch of its id would be
// kept (internal/proxy keeps them one by one):
//
//   - their header maps (internal/bulk's Elements), worked out once per
//     answer and memoised per route (Memo), since an upstream sends the
//     same header with every bulk answer but for its Date;
//   - why none of them may be stored (Vary, the reasons of
//     sidecache_batch_not_stored_total): a bulk call carries one request's
//     headers for a batch of many, so an answer that varies on a header
//     the members may send differently (RFC 9111 §4.1), or is private to
//     the call's opener (§5.2.2.7), is no member's stored variant;
//   - their writes to the cache, made together after the split (Sets).
//
// It holds no request and no route: what it needs of them comes in as
// arguments, so the rules read and test alone.
package bulkelem

import (
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sidecache/sidecache/internal/admit"
	"github.com/sidecache/sidecache/internal/bulk"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/forward"
	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/surrogate"
)

// Why an element of a bulk answer was not stored: the reason label of
// sidecache_batch_not_stored_total (docs/configuration.md, "Batching").
const (
	VaryStar       = "vary-star"        // Vary: *
	VaryPerRequest = "vary-per-request" // Vary names a header each request of the batch may send differently
	VaryWithheld   = "vary-withheld"    // Vary names a header the opener sent but the route withheld (learned now)
	VaryUnnamed    = "vary-unnamed"     // the bulk call sent a header learned from Vary that this answer's Vary does not name
	Private        = "private"          // private, no-store or Set-Cookie on the bulk answer
	Uncacheable    = "uncacheable"      // admit refused it: no-cache, no freshness, too large, tags over bounds
)

var reasons = [...]string{VaryStar, VaryPerRequest, VaryWithheld, VaryUnnamed, Private, Uncacheable}

// Reasons are every reason an element is not stored, for the metric's
// labels; the caller does not write to it.
func Reasons() []string { return reasons[:] }

// Heads is what the elements of one bulk answer share: their headers but
// for the ETag (bulk.Elements), and why none of them can be stored (""
// if they can). It is worked out once per answer, as the answer's header
// and the opener's request are the same for every element.
type Heads struct {
	*bulk.Elements
	Reason string
	// Shared, when not nil, are the header maps the answer's stored
	// elements share, a 200's (its ETag kept beside it) and any other
	// status's, and Stored the same without the tag headers (the proxy
	// strips those): read only once made. Nil on an origin route, whose
	// freshness rule reads each element's header with its ETag
	// (httpcache.Origin.Storage): each element has its own there.
	Shared, Stored [2]http.Header
	// StoredBytes are httpcache.HeaderBytes of Stored, for admit
	// (admit.Heard.HeaderBytes): measured once, not per element.
	StoredBytes [2]int64
	// Heard is what admit reads of an element's header alone: the same
	// for every element (their headers differ in Content-Type,
	// Last-Modified and ETag only), with the answer's Age.
	Heard admit.Heard
}

// Memo is a route's last Heads whose elements could be stored, for the
// next answer with the same header. What depends on the answer's header
// alone is taken from it when that header was the same: the upstream
// sends the same header with every bulk answer but for its Date, which
// changes once a second, so at a few calls a second on a route most
// calls find it, and skip the header's clones, maps and parses (issue
// 23). Safe for concurrent use; the zero value is empty.
type Memo struct{ last atomic.Pointer[memo] }

// memo is the Heads of a route's last bulk answer whose elements can be
// stored, with the answer's header and Vary names it was made from.
// Everything in it is read only once made (the shared and stored maps
// already were, shared by the answer's elements): an answer with the same
// header and names gets the same heads but for the age, which its own
// request and arrival times give.
type memo struct {
	upstream http.Header // a copy of the answer's header
	names    []string
	h        http.Header // what heard was read from
	e        Heads
}

// Heads works out what the elements of a bulk answer with header
// upstream share, whose Vary names sorted into names or reason (Vary),
// to a bulk call that left at requested; now is read for its arrival.
// origin: the route's freshness is the origin's (each element keeps a
// header of its own). tags are the route's tag headers, which stored
// elements do not keep.
func (m *Memo) Heads(upstream http.Header, names []string, reason string, origin bool, tags *surrogate.Headers, requested time.Time, now func() time.Time) Heads {
	if reason == "" {
		if l := m.last.Load(); l != nil && l.matches(upstream, names) {
			return l.heads(requested, now())
		}
	}
	if reason == "" && httpcache.Private(upstream) {
		reason = Private
	}
	heads := Heads{Elements: bulk.NewElements(httpcache.StoredHeader(upstream), names), Reason: reason}
	if reason == "" {
		h := heads.Header(http.StatusOK, nil, `""`)
		if age, ok := upstream["Age"]; ok {
			h["Age"] = age
		}
		heads.Heard = admit.Hear(h, requested, now())
		if !origin {
			for i, status := range [2]int{http.StatusOK, http.StatusNotFound} {
				heads.Shared[i] = heads.Elements.Shared(status)
				heads.Stored[i] = heads.Shared[i]
				if tags.StripsFrom(heads.Shared[i]) {
					heads.Stored[i] = heads.Elements.Shared(status)
					tags.StripFrom(heads.Stored[i])
				}
				heads.StoredBytes[i] = httpcache.HeaderBytes(heads.Stored[i])
			}
		}
		key := upstream.Clone()
		delete(key, "Content-Length")
		m.last.Store(&memo{upstream: key, names: names, h: h, e: heads})
	}
	return heads
}

// matches reports whether an answer with header upstream and Vary names
// names has m's heads: the same fields, with the same values in order, but
// for Content-Length, which no element keeps nor anything in the heads
// reads (StoredHeader drops it), and which differs with nearly every
// answer as the ids of a call do.
func (m *memo) matches(upstream http.Header, names []string) bool {
	n := len(upstream)
	if _, ok := upstream["Content-Length"]; ok {
		n--
	}
	if n != len(m.upstream) || !slices.Equal(names, m.names) {
		return false
	}
	for k, vv := range upstream {
		if k == "Content-Length" {
			continue
		}
		mv, ok := m.upstream[k]
		if !ok || (vv == nil) != (mv == nil) || !slices.Equal(vv, mv) {
			return false
		}
	}
	return true
}

// heads is m's Heads for an answer to a request that left at requested
// and arrived at received.
func (m *memo) heads(requested, received time.Time) Heads {
	e := m.e
	e.Heard.Age = httpcache.AgeAtRequest(m.h, requested, received)
	return e
}

// Vary sorts the names of a bulk answer's Vary (issue 24 item 1), the
// answer's header being upstream, into those the elements are stored as
// variants of, or a reason they cannot be shared. rules are the route's
// forwarding rules, never reports the headers never forwarded, opener is
// the header of the request whose headers the call carried, and sent the
// call's header:
//
//   - Accept-Encoding and Accept: the bulk call sends its own (none, and
//     application/json), the same for every request of the batch; the
//     transport undoes the coding, so each element is identity-coded and
//     answers every client (RFC 9110 §12.5.3). Express's compression()
//     adds Vary: Accept-Encoding to every answer: this is that case.
//   - a header the batch group is keyed on (forward.Rules.Grouped): every
//     request of the batch sent the same value; the element is stored as
//     that variant, keyed as a per-ID fetch's would be. The call sent the
//     opener's value, or the opener had none: a member that joined before
//     the route grouped on it may have another, and the bulk answer's
//     WithheldFrom sends it to fetch its own.
//   - a header the bulk call did not send (sent: the route withheld it
//     when the call left, whatever it forwards now) although the
//     opener's request carried it: the upstream answered another variant
//     than the opener's (vary-withheld); the route forwards it from now
//     on (groups then split on it).
//   - a header the route withholds and the opener did not carry: the
//     element is the variant of its absence, stored as such.
//   - "*", a header the sidecar writes (forward.Own), one forwarded with
//     the opener's value but not part of the group (User-Agent, Referer,
//     Via), or one never forwarded: the requests of the batch may differ
//     in it, so no member's key can hold the element.
//
// Sent and carried both mean on the wire (forward.OnWire): the empty
// User-Agent that keeps Go's own off a call sends none, and an opener's
// empty User-Agent is one no fetch could send, so the element made
// without one is its variant, as its own per-key fetch would be.
//
// And a header the Vary does not name but sent, the bulk call's header,
// carried because the route learned it from another answer's Vary
// (vary-unnamed, forward.Rules.SentUnvaried): the elements may have been
// shaped by it, and a member's key, which holds only what the Vary names,
// cannot hold it. They are answered to the requests of this call (whose
// batch group agreed on it, when it is grouped), never stored. A bulk
// call of requests that send no learned header stores as before.
func Vary(rules *forward.Rules, never func(string) bool, opener, upstream, sent http.Header) (names []string, reason string) {
	all, star := cachekey.ParseVary(upstream)
	if star {
		return nil, VaryStar
	}
	for _, n := range all {
		went := forward.OnWire(sent, n)
		switch {
		case n == "Accept-Encoding" || n == "Accept":
		case forward.Own(n) || never(n):
			return nil, VaryPerRequest
		case !went && forward.OnWire(opener, n):
			// Judged by what the call sent, not by what the route
			// forwards now: a route that learned n after the call left
			// (or whose rules a reload made anew) would otherwise store
			// the answer made without it as the opener's variant, for
			// every client of that value.
			rules.LearnVary(opener, []string{n})
			return nil, VaryWithheld
		case rules.Grouped(n):
			names = append(names, n)
		case rules.Forwards(n):
			return nil, VaryPerRequest
		default:
			names = append(names, n) // the variant of its absence
		}
	}
	if rules.SentUnvaried(sent, all, "Accept") { // the bulk call sets its own Accept
		return nil, VaryUnnamed
	}
	return names, ""
}
