package proxy

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/sidecache/sidecache/internal/bulk"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/entryblock"
	"github.com/sidecache/sidecache/internal/forward"
	"github.com/sidecache/sidecache/internal/httpcache"
)

// Why an element of a bulk answer was not stored: the reason label of
// sidecache_batch_not_stored_total (docs/configuration.md, "Batching").
const (
	notStoredVaryStar       = "vary-star"        // Vary: *
	notStoredVaryPerRequest = "vary-per-request" // Vary names a header each request of the batch may send differently
	notStoredVaryWithheld   = "vary-withheld"    // Vary names a header the opener sent but the route withheld (learned now)
	notStoredVaryUnnamed    = "vary-unnamed"     // the bulk call sent a header learned from Vary that this answer's Vary does not name
	notStoredPrivate        = "private"          // private, no-store or Set-Cookie on the bulk answer
	notStoredUncacheable    = "uncacheable"      // admit refused it: no-cache, no freshness, too large, tags over bounds
)

var notStoredReasons = [...]string{notStoredVaryStar, notStoredVaryPerRequest, notStoredVaryWithheld, notStoredVaryUnnamed, notStoredPrivate, notStoredUncacheable}

// keepElement is keep for one element of a bulk answer (nil: the id was
// absent), with what the answer's elements share in heads: the same admit
// and store as a per-ID fetch, under the member's key, with the header the
// app would have sent for the element alone (bulk.ElementHeader: the bulk
// answer's freshness and fields, the app's own validator for the element
// when batch.etag_field names it, else a strong ETag over the element's
// bytes).
//
// The bulk answer's Vary names request headers of the bulk call, which
// carried the opener's headers (elementVary). Where every request of the
// batch sent the same value, the element is shared and stored as the
// variant that value selects; where they may differ, it is the opener's
// answer only, and its client is told so (private, RFC 9111 §5.2.2.7),
// as for a bulk answer marked private: every other member of the call
// fetches its own (foreign.go). Each element not
// stored is counted by reason, and each reason logged once per route.
func (x *exchange) keepElement(ctx context.Context, elem []byte, upstream http.Header, heads elementHeads, requested time.Time, tags []string) bulkAnswer {
	status, body := http.StatusOK, elem
	if elem == nil {
		status, body = http.StatusNotFound, notFoundBody
	}
	etag := ""
	if f := x.rs.rt.Batch.ETagField; f != "" && elem != nil {
		etag, _ = bulk.ElementETag(elem, f)
	}
	if etag == "" && elem != nil {
		// In the room SplitForRoom left past the element's bytes.
		etag, body = bulk.ETagAfter(elem)
	}
	reason := heads.reason
	if reason != "" {
		h := heads.Header(status, body, etag)
		h["Cache-Control"] = []string{"private"}
		if httpcache.HasDirective(upstream, "private") || httpcache.HasDirective(upstream, "no-store") {
			h["Cache-Control"] = slices.Clone(upstream.Values("Cache-Control"))
		}
		x.notStored(reason, upstream)
		// What the answer is makes it unstorable but for a Vary on a
		// header the route learns now (withheld, unnamed): its next
		// call sends it, and may be stored.
		unstorable := reason != notStoredVaryWithheld && reason != notStoredVaryUnnamed
		return bulkAnswer{e: &cache.Entry{Status: status, Header: h, Body: body, StoredAt: requested}, private: true, unstorable: unstorable}
	}
	e, slot := entryblock.NewElement(x.rs.routeTag, x.rs.rt.Tags, x.params.list(), tags)
	e.Status, e.Body, e.StoredAt = status, body, requested
	var f flight
	switch age, aged := upstream["Age"]; {
	case heads.shared[0] != nil:
		// The answer's one header map for its elements of this status,
		// the element's ETag beside it in the entry (cache.Entry.SetETag):
		// tags are read from shared, the entry keeps stored (the same
		// but for the tag headers).
		i := 0
		if status != http.StatusOK {
			i = 1
		}
		e.Header = heads.stored[i]
		if status == http.StatusOK { // etag set above (ETagAfter when nothing else)
			if cap(slot) == 0 {
				slot = make([]string, 1)
			}
			slot = slot[:1:1]
			slot[0] = etag
			e.SetETag(slot)
		}
		hd := heads.heard
		hd.HeaderSized, hd.HeaderBytes = true, heads.storedBytes[i]
		f = x.keepAs(ctx, e, heads.shared[i], &hd)
	case aged && x.rs.rt.Origin != nil:
		// The origin's freshness reads the answer's age from it
		// (httpcache.Origin.Storage); the entry does not keep it.
		h := heads.HeaderIn(slot, status, body, etag)
		e.Header = maps.Clone(h)
		h["Age"] = age
		f = x.keepAs(ctx, e, h, &heads.heard)
	default:
		// h is already what the entry keeps (StoredHeader of it would
		// be a copy of it), and admit reads its age and the rest of
		// what it needs of the header from heads.heard: it is both the
		// answer admit reads and the entry's header. tagEntry reads
		// the tag headers from it before it strips them.
		e.Header = heads.HeaderIn(slot, status, body, etag)
		f = x.keepAs(ctx, e, e.Header, &heads.heard)
	}
	if !f.stored && status == http.StatusOK {
		x.notStored(notStoredUncacheable, upstream)
	}
	return bulkAnswer{e: f.c.e, stored: f.stored, private: f.c.private, unstorable: f.unstorable, vary: f.c.vary, vkey: f.c.vkey}
}

// elementHeads is what the elements of one bulk answer share: their
// headers but for the ETag (bulk.Elements), and why none of them can be
// stored ("" if they can). It is worked out once per answer, as the
// answer's header and the opener's request are the same for every element.
type elementHeads struct {
	*bulk.Elements
	reason string
	// shared, when not nil, are the header maps the answer's stored
	// elements share, a 200's (its ETag kept beside it) and any other
	// status's, and stored the same without the tag headers (tagEntry
	// strips those): read only once made. Nil on an origin route, whose
	// freshness rule reads each element's header with its ETag
	// (httpcache.Origin.Storage): each element has its own there.
	shared, stored [2]http.Header
	// storedBytes are httpcache.HeaderBytes of stored, for admit
	// (admit.Heard.HeaderBytes): measured once, not per element.
	storedBytes [2]int64
	// heard is what admit reads of an element's header alone: the same
	// for every element (their headers differ in Content-Type,
	// Last-Modified and ETag only), with the answer's Age.
	heard heard
}

// elementHeads works out what the elements of a bulk answer with header
// upstream, to the bulk call whose header was sent and which left at
// requested, share. What depends on the
// answer's header alone is taken from the route's last answer when its
// header was the same (headsMemo): the upstream sends the same header
// with every bulk answer but for its Date, which changes once a second,
// so at a few calls a second on a route most calls find it, and skip the
// header's clones, maps and parses (issue 23).
func (x *exchange) elementHeads(upstream, sent http.Header, requested time.Time) elementHeads {
	names, reason := x.elementVary(upstream, sent)
	if reason == "" {
		if m := x.rs.heads.Load(); m != nil && m.matches(upstream, names) {
			return m.heads(requested, x.h.now())
		}
	}
	if reason == "" && httpcache.Private(upstream) {
		reason = notStoredPrivate
	}
	heads := elementHeads{Elements: bulk.NewElements(httpcache.StoredHeader(upstream), names), reason: reason}
	if reason == "" {
		h := heads.Header(http.StatusOK, nil, `""`)
		if age, ok := upstream["Age"]; ok {
			h["Age"] = age
		}
		heads.heard = hear(h, requested, x.h.now())
		if x.rs.rt.Origin == nil {
			for i, status := range [2]int{http.StatusOK, http.StatusNotFound} {
				heads.shared[i] = heads.Shared(status)
				heads.stored[i] = heads.shared[i]
				if x.h.tagh.StripsFrom(heads.shared[i]) {
					heads.stored[i] = heads.Shared(status)
					x.h.tagh.StripFrom(heads.stored[i])
				}
				heads.storedBytes[i] = httpcache.HeaderBytes(heads.stored[i])
			}
		}
		key := upstream.Clone()
		delete(key, "Content-Length")
		x.rs.heads.Store(&headsMemo{upstream: key, names: names, h: h, e: heads})
	}
	return heads
}

// headsMemo is the elementHeads of a route's last bulk answer whose
// elements can be stored, with the answer's header and Vary names it was
// made from. Everything in it is read only once made (the shared and
// stored maps already were, shared by the answer's elements): an answer
// with the same header and names gets the same heads but for the age,
// which its own request and arrival times give.
type headsMemo struct {
	upstream http.Header // a copy of the answer's header
	names    []string
	h        http.Header // what heard was read from
	e        elementHeads
}

// matches reports whether an answer with header upstream and Vary names
// names has m's heads: the same fields, with the same values in order, but
// for Content-Length, which no element keeps nor anything in the heads
// reads (StoredHeader drops it), and which differs with nearly every
// answer as the ids of a call do.
func (m *headsMemo) matches(upstream http.Header, names []string) bool {
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

// heads is m's elementHeads for an answer to a request that left at
// requested and arrived at received.
func (m *headsMemo) heads(requested, received time.Time) elementHeads {
	e := m.e
	e.heard.Age = httpcache.AgeAtRequest(m.h, requested, received)
	return e
}

// elementVary sorts the names of a bulk answer's Vary (issue 24 item 1)
// into those the elements are stored as variants of, or a reason they
// cannot be shared:
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
//     the route grouped on it may have another, and withheldFrom sends
//     it to fetch its own.
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
// And a header the Vary does not name but sent, the bulk call's header,
// carried because the route learned it from another answer's Vary
// (vary-unnamed, forward.Rules.SentUnvaried): the elements may have been
// shaped by it, and a member's key, which holds only what the Vary names,
// cannot hold it. They are answered to the requests of this call (whose
// batch group agreed on it, when it is grouped), never stored. A bulk
// call of requests that send no learned header stores as before.
func (x *exchange) elementVary(upstream, sent http.Header) (names []string, reason string) {
	all, star := cachekey.ParseVary(upstream)
	if star {
		return nil, notStoredVaryStar
	}
	rules := x.rs.fwd.rules
	for _, n := range all {
		went := sentValues(sent, n) != nil
		switch {
		case n == "Accept-Encoding" || n == "Accept":
		case forward.Own(n) || neverForwarded(n):
			return nil, notStoredVaryPerRequest
		case !went && len(x.r.Header[n]) > 0:
			// Judged by what the call sent, not by what the route
			// forwards now: a route that learned n after the call
			// left (or whose rules a reload made anew) would
			// otherwise store the answer made without it as the
			// opener's variant, for every client of that value.
			x.rs.fwd.learnVary(x.r, []string{n})
			return nil, notStoredVaryWithheld
		case rules.Grouped(n):
			names = append(names, n)
		case rules.Forwards(n):
			return nil, notStoredVaryPerRequest
		default:
			names = append(names, n) // the variant of its absence
		}
	}
	if rules.SentUnvaried(sent, all, "Accept") { // fetchBulk sets its own Accept
		return nil, notStoredVaryUnnamed
	}
	return names, ""
}

// notStored counts an element not stored and logs the reason once per
// route (routeState.notStoredLogged).
func (x *exchange) notStored(reason string, upstream http.Header) {
	x.rs.bm.NotStored(reason)
	if _, seen := x.rs.notStoredLogged.LoadOrStore(reason, true); !seen {
		x.h.log.Warn("batch route: elements of bulk answers not stored",
			"route", x.rs.rt.Name, "reason", reason, "vary", upstream.Values("Vary"), "cache_control", upstream.Values("Cache-Control"))
	}
}
