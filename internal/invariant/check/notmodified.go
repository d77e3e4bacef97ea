package check

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// checkNotModified applies the invariants to a 304. A 304 tells the
// client to keep the copy its validator named, so that copy is held to
// every check a 200 would be — identity (no ETag oracle: a 304 never
// confirms a validator of an answer this request could not have
// received), resource, query, own-write and max-lag (a conditional never
// keeps a client on a version older than a write it saw, or than
// max_lag) — and the 304 itself must carry what RFC 9110 §15.4.5
// requires of it: the ETag and Date the 200 would have had, its Vary and
// Cache-Control.
func (ch *Checker) checkNotModified(q *traffic.Request, resp *http.Response, start, end time.Time) {
	ch.mu.Lock()
	ch.checked["304"]++
	ch.checked["304-"+q.Route]++
	ch.mu.Unlock()
	cs := resp.Header.Get("Cache-Status")
	c := &q.Cond
	if !c.Any() {
		ch.Violate("conditional", "%s: 304 to a request without a conditional (%s)", q, cs)
		return
	}
	if c.Ius && !c.ImsAny && len(c.InmSent) == 0 {
		ch.Violate("conditional", "%s: 304 to If-Unmodified-Since (%s)", q, cs)
		return
	}
	if resp.Header.Get("Date") == "" {
		ch.Violate("not-modified", "%s: 304 without Date (RFC 9110 §6.6.1) (%s)", q, cs)
	}
	var kept *traffic.Copy
	etag := resp.Header.Get("Etag")
	switch {
	case c.Star:
		return // any current representation matches; the client claims to hold one
	case len(c.InmSent) > 0:
		if etag == "" {
			ch.Violate("not-modified", "%s: 304 to If-None-Match without the ETag it matched (RFC 9110 §15.4.5) (%s)", q, cs)
			return
		}
		if !origin.MatchWeak(c.InmSent, etag) {
			ch.Violate("conditional", "%s: 304 with ETag %s, which If-None-Match did not name (%s)", q, etag, cs)
			return
		}
		for _, cp := range c.Inm {
			if origin.MatchWeak([]string{cp.Etag}, etag) {
				kept = cp
				break
			}
		}
		if kept == nil {
			return // only the bogus tag matched: a 304 the client cannot use, but no copy it keeps
		}
	case c.Ims != nil:
		kept = c.Ims
	default:
		return // a date of no copy: the client keeps nothing it received
	}
	// One origin tag always comes with the same Vary and Cache-Control
	// (package origin), so a 304 that matched it must repeat them. A date
	// names no representation: the one a 304 to it stands for is the
	// current one, whose fields the client has not seen.
	if kept.Vary && len(c.InmSent) > 0 && resp.Header.Get("Vary") == "" {
		ch.Violate("not-modified", "%s: 304 without the Vary its 200 had (RFC 9110 §15.4.5) (%s)", q, cs)
	}
	if kept.Cc && len(c.InmSent) > 0 && resp.Header.Get("Cache-Control") == "" {
		ch.Violate("not-modified", "%s: 304 without the Cache-Control its 200 had (RFC 9110 §15.4.5) (%s)", q, cs)
	}
	ch.mu.Lock()
	switch {
	case q.Kind == "list":
		ch.checked["304-list"]++
	case kept.Who != q.Who.Name:
		ch.checked["304-foreign"]++
	}
	ch.mu.Unlock()
	if kept.List != nil || q.Kind == "list" {
		for _, st := range kept.List {
			if !containsID(q.Ids, st.ID) || st.Res != q.Route+"/"+st.ID {
				ch.Violate("conditional", "%s: 304 keeps a list with element %s, not asked for (%s)", q, st.ID, cs)
				return
			}
		}
		for id := range uniq(q.Ids) {
			if origin.GoodID("/"+id) && !kept.HasID(id) {
				ch.Violate("conditional", "%s: 304 keeps a list without id %s (%s)", q, id, cs)
				return
			}
		}
		return
	}
	st := kept.St
	if kept == c.Ims {
		// A date names no representation: the client keeps its copy of
		// its own variant and query (fits); what it was shaped by
		// beyond that (a bypassed request's own Host) is not the 304's
		// doing. Its version is.
		st.Fh = strings.ToLower(ch.cfg.Host)
	}
	pre := fmt.Sprintf("304 (ETag %q, Last-Modified %q, Date %q) keeps %s's copy (ETag %q, Last-Modified %q, Date %q): ", etag, resp.Header.Get("Last-Modified"), resp.Header.Get("Date"), kept.Who, kept.Etag, kept.LastMod, kept.Date)
	ch.checkStampAs(q, resp, st, start, end, pre)
}

func containsID(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func uniq(ids []string) map[string]bool {
	m := map[string]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}
