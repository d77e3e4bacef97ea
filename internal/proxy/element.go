package proxy

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/sidecache/sidecache/internal/bulk"
	"github.com/sidecache/sidecache/internal/bulkanswer"
	"github.com/sidecache/sidecache/internal/bulkelem"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/entryblock"
	"github.com/sidecache/sidecache/internal/httpcache"
)

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
func (x *exchange) keepElement(ctx context.Context, elem []byte, upstream http.Header, heads bulkelem.Heads, requested time.Time, tags []string) bulkanswer.Answer {
	status, body := http.StatusOK, elem
	if elem == nil {
		status, body = http.StatusNotFound, bulkanswer.NotFoundBody()
	}
	etag := ""
	if f := x.rs.rt.Batch.ETagField; f != "" && elem != nil {
		etag, _ = bulk.ElementETag(elem, f)
	}
	if etag == "" && elem != nil {
		// In the room SplitForRoom left past the element's bytes.
		etag, body = bulk.ETagAfter(elem)
	}
	reason := heads.Reason
	if reason != "" {
		h := heads.Header(status, body, etag)
		h["Cache-Control"] = []string{"private"}
		if httpcache.HasDirective(upstream, "private") || httpcache.HasDirective(upstream, "no-store") {
			h["Cache-Control"] = slices.Clone(upstream.Values("Cache-Control"))
		}
		// The opener's alone (bulkanswer.Answer.NotFor sends every other
		// request to a call of its own): the cookie its call was sent
		// with its answer is its own, as a per-key fill's is its
		// leader's.
		bulk.OpenerCookies(h, upstream)
		x.notStored(reason, upstream)
		// What the answer is makes it unstorable but for a Vary on a
		// header the route learns now (withheld, unnamed): its next
		// call sends it, and may be stored.
		unstorable := reason != bulkelem.VaryWithheld && reason != bulkelem.VaryUnnamed
		return bulkanswer.Answer{E: &cache.Entry{Status: status, Header: h, Body: body, StoredAt: requested}, Private: true, Unstorable: unstorable}
	}
	e, slot := entryblock.NewElement(x.rs.routeTag, x.rs.rt.Tags, x.params.list(), tags)
	e.Status, e.Body, e.StoredAt = status, body, requested
	var f flight
	switch age, aged := upstream["Age"]; {
	case heads.Shared[0] != nil:
		// The answer's one header map for its elements of this status,
		// the element's ETag beside it in the entry (cache.Entry.SetETag):
		// tags are read from shared, the entry keeps stored (the same
		// but for the tag headers).
		i := 0
		if status != http.StatusOK {
			i = 1
		}
		e.Header = heads.Stored[i]
		if status == http.StatusOK { // etag set above (ETagAfter when nothing else)
			if cap(slot) == 0 {
				slot = make([]string, 1)
			}
			slot = slot[:1:1]
			slot[0] = etag
			e.SetETag(slot)
		}
		hd := heads.Heard
		hd.HeaderSized, hd.HeaderBytes = true, heads.StoredBytes[i]
		f = x.keepAs(ctx, e, heads.Shared[i], &hd)
	case aged && x.rs.rt.Origin != nil:
		// The origin's freshness reads the answer's age from it
		// (httpcache.Origin.Storage); the entry does not keep it.
		h := heads.HeaderIn(slot, status, body, etag)
		e.Header = maps.Clone(h)
		h["Age"] = age
		f = x.keepAs(ctx, e, h, &heads.Heard)
	default:
		// h is already what the entry keeps (StoredHeader of it would
		// be a copy of it), and admit reads its age and the rest of
		// what it needs of the header from heads.Heard: it is both the
		// answer admit reads and the entry's header. tagEntry reads
		// the tag headers from it before it strips them.
		e.Header = heads.HeaderIn(slot, status, body, etag)
		f = x.keepAs(ctx, e, e.Header, &heads.Heard)
	}
	if !f.stored && status == http.StatusOK {
		x.notStored(bulkelem.Uncacheable, upstream)
	}
	return bulkanswer.Answer{E: f.c.e, Stored: f.stored, Private: f.c.private, Unstorable: f.unstorable, Vary: f.c.vary, VKey: f.c.vkey}
}

// elementHeads works out what the elements of a bulk answer with header
// upstream, to the bulk call whose header was sent and which left at
// requested, share (internal/bulkelem): its Vary sorted by the route's
// forwarding rules and the opener's request, the heads from the route's
// last answer when its header was the same (routeState.heads).
func (x *exchange) elementHeads(upstream, sent http.Header, requested time.Time) bulkelem.Heads {
	names, reason := bulkelem.Vary(x.rs.fwd.rules, neverForwarded, x.r.Header, upstream, sent)
	return x.rs.heads.Heads(upstream, names, reason, x.rs.rt.Origin != nil, &x.h.tagh, requested, x.h.now)
}

// storeElements makes the writes keepAs left in x.sets for answers
// (bulkelem.Sets.Store), and takes back the stored of the answers whose
// write failed: counted then as not stored (uncacheable), as keepElement
// counts an element keepAs did not store. It runs before the answers
// reach any request: a write that fails is never reported as stored.
func (x *exchange) storeElements(ctx context.Context, answers []bulkanswer.Answer, upstream http.Header) {
	s := x.sets
	x.sets = nil
	s.Store(ctx, x.h.cache, x.h.tombs, x.h.now, func(owner int, key string, err error) {
		x.h.log.Debug("cache set", "key", key, "err", err)
		a := &answers[owner]
		a.Stored = false
		if a.E.Status == http.StatusOK {
			x.notStored(bulkelem.Uncacheable, upstream)
		}
	})
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
