package traffic

import (
	"net/http"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/origin"
)

// Copy is an answer a client received with a validator: what a later
// conditional request may name, and what a 304 to it tells the client to
// keep. Every client's copies are in one pool (Gen.copies), so a client
// can send validators another identity received.
type Copy struct {
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

// Cond is the conditional a request sent.
type Cond struct {
	Inm     []*Copy  // copies whose ETags If-None-Match named
	InmSent []string // the tags as sent (W/ added, bogus ones included)
	Star    bool     // If-None-Match: *
	Ims     *Copy    // the copy whose Last-Modified (or Date) If-Modified-Since named
	ImsAny  bool     // If-Modified-Since sent (a copy's, or an arbitrary date)
	Ius     bool     // If-Unmodified-Since sent
}

func (c *Cond) Any() bool { return len(c.InmSent) > 0 || c.Star || c.ImsAny || c.Ius }

// maxCopies bounds the pool per resource: the newest copies are the ones
// worth naming.
const maxCopies = 24

// copyKey is the pool a request draws from and its answers go to: one per
// resource, one for every list.
func copyKey(q *Request) string {
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
func (g *Gen) drawConditional(q *Request) {
	m := g.mix
	if !m.Has("if-none-match") && !m.Has("if-modified-since") && !m.Has("if-unmodified-since") {
		return
	}
	roll, pick1, pick2, style := g.rng.IntN(100), g.rng.IntN(1<<20), g.rng.IntN(1<<20), g.rng.IntN(100)
	g.mu.Lock()
	pool := g.copies[copyKey(q)]
	g.mu.Unlock()
	var own, ownTagged, foreignTagged []*Copy
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
			h.Set("If-Modified-Since", time.Now().Add(24*time.Hour).UTC().Format(http.TimeFormat))
		case m.Has("duplicate-headers") && len(tags) > 1 && style%2 == 0:
			h["If-None-Match"] = tags // one field line each (RFC 9110 §5.3)
		default:
			h.Set("If-None-Match", strings.Join(tags, ", "))
		}
	case m.Has("if-modified-since") && roll < inm+12:
		q.Cond.ImsAny = true
		var mine []*Copy
		for _, c := range own {
			if c.Query == q.Query && c.fits(q) {
				mine = append(mine, c)
			}
		}
		switch {
		case style < 15:
			h.Set("If-Modified-Since", "Sat, 01 Jan 2000 00:00:00 GMT")
		case style < 25:
			h.Set("If-Modified-Since", time.Now().Add(24*time.Hour).UTC().Format(http.TimeFormat))
		case len(mine) > 0:
			c := mine[pick1%len(mine)]
			q.Cond.Ims = c
			v := c.LastMod
			if v == "" {
				v = c.Date
			}
			h.Set("If-Modified-Since", v)
		default:
			h.Set("If-Modified-Since", time.Now().Add(-time.Minute).UTC().Format(http.TimeFormat))
		}
	case m.Has("if-unmodified-since") && roll < inm+16:
		q.Cond.Ius = true
		h.Set("If-Unmodified-Since", time.Now().UTC().Format(http.TimeFormat))
	}
}

// fits reports whether the copy is of the variant q asks for: every
// dimension it depends on has the value q sends. A client revalidates
// the copy it holds for what it asks; one of another variant would be
// its own mistake, not the cache's.
func (c *Copy) fits(q *Request) bool {
	for k, v := range c.St.By {
		if q.Sent[k] != v {
			return false
		}
	}
	return true
}

// Remember puts a 200 that carries a validator into the pool.
func (g *Gen) Remember(q *Request, resp *http.Response, st *origin.Stamp, list []origin.Stamp) {
	if resp.StatusCode != http.StatusOK || q.Method != http.MethodGet {
		return
	}
	c := &Copy{
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
	g.mu.Lock()
	pool := append(g.copies[k], c)
	if len(pool) > maxCopies {
		pool = pool[len(pool)-maxCopies:]
	}
	g.copies[k] = pool
	g.mu.Unlock()
}

func (c *Copy) HasID(id string) bool {
	for _, st := range c.List {
		if st.ID == id {
			return true
		}
	}
	return false
}
