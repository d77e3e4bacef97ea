package invariant

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/origin"
)

// copyOf is an answer a client received with a validator: what a later
// conditional request may name, and what a 304 to it tells the client to
// keep. Every client's copies are in one pool (run.copies), so a client
// can send validators another identity received.
type copyOf struct {
	Who     string
	Query   string
	Etag    string
	Date    string
	LastMod string
	Vary    bool // the 200 carried Vary / Cache-Control, which a 304 must repeat
	Cc      bool
	St      origin.Stamp   // a read's stamp
	List    []origin.Stamp // a list's elements
}

// cond is the conditional a request sent.
type cond struct {
	Inm     []*copyOf // copies whose ETags If-None-Match named
	InmSent []string  // the tags as sent (W/ added, bogus ones included)
	Star    bool      // If-None-Match: *
	Ims     *copyOf   // the copy whose Last-Modified (or Date) If-Modified-Since named
	ImsAny  bool      // If-Modified-Since sent (a copy's, or an arbitrary date)
	Ius     bool      // If-Unmodified-Since sent
}

func (c *cond) any() bool { return len(c.InmSent) > 0 || c.Star || c.ImsAny || c.Ius }

// maxCopies bounds the pool per resource: the newest copies are the ones
// worth naming.
const maxCopies = 24

// copyKey is the pool a request draws from and its answers go to: one per
// resource, one for every list.
func copyKey(q *request) string {
	if q.Kind == "list" {
		return "list:" + q.Route
	}
	return q.Res
}

// drawConditional adds a conditional to a GET: If-None-Match with tags of
// the client's own copies or, hostile, of another identity's (private and
// per-identity answers included), weak or strong, several in a list,
// spread over duplicate field lines, or "*"; If-Modified-Since with the
// Last-Modified (else Date) of a copy of the client's own variant, or a
// date far in the past or future; If-Unmodified-Since (a precondition
// only the origin may evaluate). The rng is drawn the same number of
// times whatever the pool holds, so the seed alone fixes every later draw.
func (r *run) drawConditional(q *request) {
	m := r.cfg.Mix
	if !m.Has("if-none-match") && !m.Has("if-modified-since") && !m.Has("if-unmodified-since") {
		return
	}
	roll, pick1, pick2, style := r.rng.IntN(100), r.rng.IntN(1<<20), r.rng.IntN(1<<20), r.rng.IntN(100)
	r.mu.Lock()
	pool := r.copies[copyKey(q)]
	r.mu.Unlock()
	var own, ownTagged, foreignTagged []*copyOf
	for _, c := range pool {
		switch {
		case c.Etag == "":
		case c.Who == q.Who.Name:
			ownTagged = append(ownTagged, c)
		default:
			foreignTagged = append(foreignTagged, c)
		}
		if c.Who == q.Who.Name {
			own = append(own, c)
		}
	}
	h := q.Hdr
	inm := 14
	if q.Kind == "list" {
		inm = 60 // lists are few and their answers fewer: revalidate most
	}
	switch {
	case m.Has("if-none-match") && roll < inm:
		cands := ownTagged
		if m.Has("if-none-match-foreign") && (len(ownTagged) == 0 || style < 50) {
			cands = append(foreignTagged, ownTagged...)
		}
		var tags []string
		switch {
		case style%10 == 0:
			q.Cond.Star = true
			tags = []string{"*"}
		case len(cands) == 0:
			tags = []string{`"not-a-tag"`}
		default:
			for i, p := range []int{pick1, pick2} {
				if i == 1 && style%3 != 0 {
					break // a list of two, one time in three
				}
				c := cands[p%len(cands)]
				t := c.Etag
				if style%4 == 1 && !strings.HasPrefix(t, "W/") {
					t = "W/" + t // the weak comparison still matches (RFC 9110 §13.1.2)
				}
				q.Cond.Inm = append(q.Cond.Inm, c)
				tags = append(tags, t)
			}
			if style%5 == 2 {
				tags = append([]string{`"stale-0"`}, tags...)
			}
		}
		q.Cond.InmSent = tags
		switch {
		case m.Has("duplicate-headers") && style%7 == 3:
			// An empty first line, and a date that would make any copy
			// current: If-None-Match is still there, so the date must
			// be ignored (RFC 9110 §13.2.2) and only a named tag may
			// make a 304.
			h["If-None-Match"] = append([]string{""}, tags...)
			h.Set("If-Modified-Since", now().Add(24*time.Hour).UTC().Format(http.TimeFormat))
		case m.Has("duplicate-headers") && len(tags) > 1 && style%2 == 0:
			h["If-None-Match"] = tags // one field line each (RFC 9110 §5.3)
		default:
			h.Set("If-None-Match", strings.Join(tags, ", "))
		}
	case m.Has("if-modified-since") && roll < inm+12:
		q.Cond.ImsAny = true
		var mine []*copyOf
		for _, c := range own {
			if c.Query == q.Query && c.fits(q) {
				mine = append(mine, c)
			}
		}
		switch {
		case style < 15:
			h.Set("If-Modified-Since", "Sat, 01 Jan 2000 00:00:00 GMT")
		case style < 25:
			h.Set("If-Modified-Since", now().Add(24*time.Hour).UTC().Format(http.TimeFormat))
		case len(mine) > 0:
			c := mine[pick1%len(mine)]
			q.Cond.Ims = c
			v := c.LastMod
			if v == "" {
				v = c.Date
			}
			h.Set("If-Modified-Since", v)
		default:
			h.Set("If-Modified-Since", now().Add(-time.Minute).UTC().Format(http.TimeFormat))
		}
	case m.Has("if-unmodified-since") && roll < inm+16:
		q.Cond.Ius = true
		h.Set("If-Unmodified-Since", now().UTC().Format(http.TimeFormat))
	}
}

// fits reports whether the copy is of the variant q asks for: every
// dimension it depends on has the value q sends. A client revalidates
// the copy it holds for what it asks; one of another variant would be
// its own mistake, not the cache's.
func (c *copyOf) fits(q *request) bool {
	for k, v := range c.St.By {
		if q.Sent[k] != v {
			return false
		}
	}
	return true
}

// remember puts a 200 that carries a validator into the pool.
func (r *run) remember(q *request, resp *http.Response, st *origin.Stamp, list []origin.Stamp) {
	if resp.StatusCode != http.StatusOK || q.Method != http.MethodGet {
		return
	}
	c := &copyOf{
		Who: q.Who.Name, Query: q.Query, Etag: resp.Header.Get("Etag"),
		Date: resp.Header.Get("Date"), LastMod: resp.Header.Get("Last-Modified"),
		Vary: resp.Header.Get("Vary") != "", Cc: resp.Header.Get("Cache-Control") != "",
		List: list,
	}
	if st != nil {
		c.St = *st
	}
	if c.Etag == "" && c.LastMod == "" && c.Date == "" {
		return
	}
	k := copyKey(q)
	r.mu.Lock()
	pool := append(r.copies[k], c)
	if len(pool) > maxCopies {
		pool = pool[len(pool)-maxCopies:]
	}
	r.copies[k] = pool
	r.mu.Unlock()
}

// checkNotModified applies the invariants to a 304. A 304 tells the
// client to keep the copy its validator named, so that copy is held to
// every check a 200 would be — identity (no ETag oracle: a 304 never
// confirms a validator of an answer this request could not have
// received), resource, query, own-write and max-lag (a conditional never
// keeps a client on a version older than a write it saw, or than
// max_lag) — and the 304 itself must carry what RFC 9110 §15.4.5
// requires of it: the ETag and Date the 200 would have had, its Vary and
// Cache-Control.
func (r *run) checkNotModified(q *request, resp *http.Response, start, end time.Time) {
	r.mu.Lock()
	r.rep.Checked["304"]++
	r.rep.Checked["304-"+q.Route]++
	r.mu.Unlock()
	cs := resp.Header.Get("Cache-Status")
	c := &q.Cond
	if !c.any() {
		r.violate("conditional", "%s: 304 to a request without a conditional (%s)", q, cs)
		return
	}
	if c.Ius && !c.ImsAny && len(c.InmSent) == 0 {
		r.violate("conditional", "%s: 304 to If-Unmodified-Since (%s)", q, cs)
		return
	}
	if resp.Header.Get("Date") == "" {
		r.violate("not-modified", "%s: 304 without Date (RFC 9110 §6.6.1) (%s)", q, cs)
	}
	var kept *copyOf
	etag := resp.Header.Get("Etag")
	switch {
	case c.Star:
		return // any current representation matches; the client claims to hold one
	case len(c.InmSent) > 0:
		if etag == "" {
			r.violate("not-modified", "%s: 304 to If-None-Match without the ETag it matched (RFC 9110 §15.4.5) (%s)", q, cs)
			return
		}
		if !origin.MatchWeak(c.InmSent, etag) {
			r.violate("conditional", "%s: 304 with ETag %s, which If-None-Match did not name (%s)", q, etag, cs)
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
	// (origin.go), so a 304 that matched it must repeat them. A date
	// names no representation: the one a 304 to it stands for is the
	// current one, whose fields the client has not seen.
	if kept.Vary && len(c.InmSent) > 0 && resp.Header.Get("Vary") == "" {
		r.violate("not-modified", "%s: 304 without the Vary its 200 had (RFC 9110 §15.4.5) (%s)", q, cs)
	}
	if kept.Cc && len(c.InmSent) > 0 && resp.Header.Get("Cache-Control") == "" {
		r.violate("not-modified", "%s: 304 without the Cache-Control its 200 had (RFC 9110 §15.4.5) (%s)", q, cs)
	}
	r.mu.Lock()
	switch {
	case q.Kind == "list":
		r.rep.Checked["304-list"]++
	case kept.Who != q.Who.Name:
		r.rep.Checked["304-foreign"]++
	}
	r.mu.Unlock()
	if kept.List != nil || q.Kind == "list" {
		for _, st := range kept.List {
			if !containsID(q.Ids, st.ID) || st.Res != q.Route+"/"+st.ID {
				r.violate("conditional", "%s: 304 keeps a list with element %s, not asked for (%s)", q, st.ID, cs)
				return
			}
		}
		for id := range uniq(q.Ids) {
			if goodID("/"+id) && !kept.hasID(id) {
				r.violate("conditional", "%s: 304 keeps a list without id %s (%s)", q, id, cs)
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
		st.Fh = strings.ToLower(r.cfg.Host)
	}
	pre := fmt.Sprintf("304 (ETag %q, Last-Modified %q, Date %q) keeps %s's copy (ETag %q, Last-Modified %q, Date %q): ", etag, resp.Header.Get("Last-Modified"), resp.Header.Get("Date"), kept.Who, kept.Etag, kept.LastMod, kept.Date)
	r.checkStampAs(q, resp, st, start, end, pre)
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

func (c *copyOf) hasID(id string) bool {
	for _, st := range c.List {
		if st.ID == id {
			return true
		}
	}
	return false
}
