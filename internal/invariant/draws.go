package invariant

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// The run's draws: what a round asks for, of which origin profile, on
// which of the seed's random streams (run.go holds the streams).

// drawAsAsked makes a quarter of the round's split lists one the sidecar
// must pass through whole (list-as-asked: traffic.AsAsked).
func (r *run) drawAsAsked(q *traffic.Request) {
	if !r.cfg.Mix.Has("list-as-asked") || q.Kind != "list" || len(q.Ids) == 0 || r.asked.IntN(4) != 0 {
		return
	}
	traffic.AsAsked(q, r.asked)
	r.chk.Count("list-as-asked", 1)
}

// drawStale draws the profile of the bulk endpoint /s (route s, with
// stale_if_error, and its split list) for the round, and 0-3 requests of
// it: answers stale at once (max-age=0) so stored copies answer only when
// a fetch fails; Vary: Accept-Language, so copies of several variants
// are held; private (the members of a shared call but its opener fetch
// their own, and those calls fail too: fetchForeign); 503s and hang-ups
// (split-stale); 206 with part of the list (bulk-206); Vary: X-Tenant, a
// header route s withholds until it learns it (bulk-vary-withheld).
func (r *run) drawStale() []*traffic.Request {
	m := r.cfg.Mix
	if !m.Has("split-stale") && !m.Has("bulk-206") {
		return nil
	}
	rng := r.stale
	chance := func(pct int) bool { return rng.IntN(100) < pct }
	var p origin.Profile
	if m.Has("split-stale") {
		p.StaleAtOnce = chance(80)
		lang := m.Has("vary") && chance(30)
		if lang {
			// Keyed (route s's key.headers): batches split on it.
			p.Dims = append(p.Dims, origin.Dim{Name: "lang", How: "vary"})
		}
		if chance(30) && r.withheld {
			// Not keyed nor learned yet: withheld from the bulk call.
			p.Dims = append(p.Dims, origin.Dim{Name: "tenant", How: "vary"})
		}
		if chance(40) {
			p.Dims = append(p.Dims, origin.Dim{Name: "addr", How: "private"})
		}
		if chance(60) {
			p.Fail = 20 + rng.IntN(40)
		}
		if m.Has("hangup") && chance(10) {
			p.Hang = 5 + rng.IntN(15)
		}
	}
	if m.Has("bulk-206") && chance(30) {
		p.Partial = 20 + rng.IntN(50)
	}
	r.cfg.Origin.SetProfile(origin.StaleBulkProfile, p)
	n := rng.IntN(4)
	if len(p.Dims) > 0 && p.Dims[len(p.Dims)-1].Name == "addr" {
		// Private: a list's ids are answered for another request only
		// when it shares a call it did not open.
		n = 2 + rng.IntN(4)
	}
	reqs := make([]*traffic.Request, n)
	for i := range reqs {
		reqs[i] = r.gen.StaleRequest(rng)
	}
	return reqs
}

// drawAgents draws the profiles of route a's resources for the round and
// 0-3 reads of them (vary-user-agent, traffic.AgentRequest), on a
// sequence of their own, so that they move no draw of the others: every
// answer says Vary: User-Agent and is stamped with the User-Agent the
// origin saw ("" when none came), so the identity check holds each
// client to the answer made for the User-Agent it sent. Route a keys
// nothing and forwards nothing until an answer's Vary names a header: a
// fetch that withheld User-Agent sent none (the sidecar's empty value
// keeps Go's own off the wire), and its answer, the origin's to none,
// is no client's variant but an empty User-Agent's. Slow now and then,
// so reads of several User-Agents collapse.
func (r *run) drawAgents() []*traffic.Request {
	if !r.cfg.Mix.Has("vary-user-agent") {
		return nil
	}
	rng := r.agents
	for id := 1; id <= 3; id++ {
		p := origin.Profile{Dims: []origin.Dim{{Name: "ua", How: "vary"}}}
		if r.cfg.Mix.Has("slow") && rng.IntN(100) < 30 {
			p.Delay = time.Duration(20+rng.IntN(100)) * time.Millisecond
		}
		r.cfg.Origin.SetProfile(fmt.Sprintf("a/%d", id), p)
	}
	reqs := make([]*traffic.Request, rng.IntN(4))
	for i := range reqs {
		reqs[i] = r.gen.AgentRequest(rng)
	}
	if len(reqs) > 0 {
		r.chk.Count("vary-user-agent", len(reqs))
	}
	return reqs
}

// drawListWrites adds a write to a list endpoint to about one round in
// four (write-list, traffic.ListWrite), on a sequence of its own (stream
// 50), so that it moves no draw of the others. Its ids, 1-8, are those
// the per-ID reads of routes u and e ask for (and route u's split lists
// often), so the copies it must drop are there, in the replicas' L1s and
// in L2.
func (r *run) drawListWrites() []*traffic.Request {
	if !r.cfg.Mix.Has("write-list") || r.listWrites.IntN(4) != 0 {
		return nil
	}
	return []*traffic.Request{r.gen.ListWrite(r.listWrites)}
}

// drawTrickle makes some plain writes trickled (send.go, doTrickled).
func (r *run) drawTrickle(q *traffic.Request) {
	if !r.cfg.Mix.Has("trickle-write") || r.cfg.Trickle == "" || q.Method != http.MethodPatch ||
		q.Hangup || q.Chunked || q.Absolute || q.Asterisk || q.Folded || origin.Resource(q.Path) == "" {
		return
	}
	if r.trickles.IntN(100) < 10 {
		// Its read back (readAfterTrickle) is in its budget.
		q.Trickle, q.Body, q.Budget = true, `{"bump":1}`, traffic.BudgetWrite+traffic.BudgetRead
		q.Replica = len(r.cfg.Replicas) // the trickle replica's index, as the checks name it
	}
}

// drawResources gives every resource a fresh profile and returns the
// round's hot resource id (most requests of the round go to it, so they
// collapse).
func (r *run) drawResources() string {
	for id := 1; id <= 4; id++ {
		r.cfg.Origin.SetProfile(fmt.Sprintf("r/%d", id), r.drawFields(r.drawContinue(r.drawUnvaried(r.drawProfile(true))), false))
		r.cfg.Origin.SetProfile(fmt.Sprintf("p/%d", id), r.drawFields(r.drawContinue(r.drawProfile(true)), false))
	}
	// The bulk endpoint's profile: only its Gzip (compression()-shaped
	// answers) is read.
	bulk := origin.Profile{Gzip: r.cfg.Mix.Has("bulk-vary-gzip") && r.chance(60)}
	if r.cfg.Mix.Has("trailers") && r.chance(40) {
		bulk.Trailers = 30 + r.rng.IntN(71)
	}
	if r.cfg.Mix.Has("bulk-large") && r.chance(30) {
		// Over max_body_bytes three times over, so over the bound of
		// any call holding it: passed through, never a 502.
		bulk.Large = 3*r.cfg.MaxBodyBytes + 1
	}
	if r.cfg.Mix.Has("bulk-big") && r.bigs.IntN(100) < 30 {
		// Records that fit max_body_bytes alone, two or more of them
		// together over it (D3): a bulk answer is read no further than
		// the bound, so its requests are asked for again apart and
		// lists holding them pass through; never a 502 for a good id.
		bulk.Big = r.cfg.MaxBodyBytes/4 + r.bigs.IntN(r.cfg.MaxBodyBytes/2)
	}
	if r.cfg.Mix.Has("bulk-per-address") && r.chance(25) {
		// Per-address elements, declared as a Vary on the header the
		// sidecar writes per client, or as private (probe h1 D2).
		bulk.Dims = []origin.Dim{r.bulkCookie(r.targetedNoStore(r.strayPrivate(origin.Dim{Name: "addr", How: []string{"vary", "private"}[r.rng.IntN(2)]})))}
	}
	// On stream 63 after bulkCookie's draw (both rows are this stream's):
	// one round in four, the bulk endpoint names a few ids padded.
	bulk.EchoPadded = r.cfg.Mix.Has("bulk-echo-spelling") && r.bulkCookies.IntN(4) == 0
	// And, one round in five, starts its arrays with a byte order mark.
	bulk.BOM = r.cfg.Mix.Has("bulk-bom") && r.bulkCookies.IntN(5) == 0
	// On stream 72 (nulls.go): whether the round's answers write null
	// for the absent ids, and whether the round asks for them.
	r.nullsMode = r.drawNullsMode()
	bulk.NullAbsent = r.nullsMode == 1
	r.cfg.Origin.SetProfile(origin.BulkProfile, bulk)
	for _, n := range tNames {
		r.cfg.Origin.SetProfile("t/"+strings.ToLower(n), r.drawContinue(r.drawProfile(false)))
	}
	if r.cfg.Mix.Has("keyed-headers") {
		for id := 1; id <= 4; id++ {
			// Route k keys both headers: its answers depend on them
			// with no Vary (How "none"), as an app behind a route
			// whose key.headers the operator wrote.
			p := r.drawProfile(false)
			p.Dims = []origin.Dim{{Name: "lang", How: "none"}, {Name: "tenant", How: "none"}}
			r.cfg.Origin.SetProfile(fmt.Sprintf("k/%d", id), r.drawContinue(p))
		}
	}
	if r.cfg.Mix.Has("stale-if-error") {
		for id := 1; id <= 4; id++ {
			p := r.drawFields(r.drawContinue(r.drawStaleProfile()), true)
			r.cfg.Origin.SetProfile(fmt.Sprintf("n/%d", id), p)
			if p.NotModifiedCoding {
				r.recoded = append(r.recoded, fmt.Sprint(id))
			}
		}
	}
	return fmt.Sprint(1 + r.rng.IntN(4))
}

// drawUnvaried adds to p, an /r resource's profile, a dependency on
// Accept-Language or X-Tenant that its answers do not name in Vary
// ("unvaried"), when it has none on that header already. Other /r
// resources name them (drawProfile's "vary"), so route r learns them and
// forwards them on every path: an answer made for one client's value and
// stored under the URL's key would reach the others (probe h1, D3).
// Only route r: route p forwards every header (forward_headers: all),
// where the README leaves undeclared dependencies to the operator.
func (r *run) drawUnvaried(p origin.Profile) origin.Profile {
	m := r.cfg.Mix
	chance := func(pct int) bool { return r.unvaried.IntN(100) < pct }
	if !m.Has("learned-unvaried") || !m.Has("vary") || !chance(60) {
		return p
	}
	name := "lang"
	if m.Has("tenant") && (!m.Has("accept-language") || chance(40)) {
		name = "tenant"
	} else if !m.Has("accept-language") {
		return p
	}
	if slices.ContainsFunc(p.Dims, func(d origin.Dim) bool { return d.Name == name }) {
		return p
	}
	p.Dims = append(p.Dims, origin.Dim{Name: name, How: "unvaried"})
	return p
}

// drawContinue makes p's origin send 100 Continue of its own before some
// of its answers (origin-continue), drawn on a sequence of its own, as
// drawUnvaried's, so that the row moves no other row's draw.
func (r *run) drawContinue(p origin.Profile) origin.Profile {
	if r.cfg.Mix.Has("origin-continue") && r.conts.IntN(100) < 40 {
		p.Continue = 30 + r.conts.IntN(70)
	}
	return p
}

// withheldOrigin are the withheld-field row's Cache-Control on a
// freshness: origin route (n): answers stored (max-age=60) and answers
// not stored (no freshness, nor stale windows, nor a validator), which
// were handed to the requests collapsed onto their fetch whole.
var withheldOrigin = [...]string{
	`no-cache, private="X-Secret"`,
	`max-age=0, must-revalidate, private="X-Secret"`,
	`max-age=0, must-revalidate, no-cache="X-Secret"`,
	`max-age=60, private="X-Secret"`,
}

// drawFields adds to p the rows about the fields of an answer, drawn on a
// sequence of their own (PCG stream 40), as drawUnvaried's: withheld-field
// (a qualified private or no-cache naming a field that holds the caller's
// address; on route r and p, route mode, no-cache="X-Secret", which is
// not stored yet is shared), coding-lines (gzip on two Content-Encoding
// lines) and 304-coding (304s saying gzip; on route n identity answers
// with a validator, which its answers otherwise lack, so its
// stale-at-once copies are revalidated). originMode: p is route n's.
func (r *run) drawFields(p origin.Profile, originMode bool) origin.Profile {
	m := r.cfg.Mix
	chance := func(pct int) bool { return r.fields.IntN(100) < pct }
	if m.Has("withheld-field") && chance(25) {
		p.Withhold = `no-cache="X-Secret"`
		if originMode {
			p.Withhold = withheldOrigin[r.fields.IntN(len(withheldOrigin))]
		}
		if p.Delay == 0 {
			// Slow, so the round's requests collapse onto its fetch.
			p.Delay = time.Duration(20+r.fields.IntN(100)) * time.Millisecond
		}
	}
	if m.Has("coding-lines") && p.Gzip && chance(50) {
		p.CodingLines = true
	}
	if m.Has("304-coding") && chance(30) {
		p.NotModifiedCoding = true
		if originMode {
			// Identity, stale at once and with a validator, so that
			// every read of a variant after its first revalidates it:
			// route n's answers otherwise carry none.
			p.ETag, p.StaleAtOnce, p.Gzip = true, true, false
		}
	}
	return p
}

// drawStaleProfile is an /n resource's profile (route n: freshness:
// origin, stale_if_error): answers that vary, copies that are stale at
// once and failures, so stale-if-error copies are served while requests
// of other variants share the refetch's flight. Without it /n answers
// never vary nor fail and its copies stay fresh for the whole run.
func (r *run) drawStaleProfile() origin.Profile {
	m := r.cfg.Mix
	p := origin.Profile{Size: 64 + r.rng.IntN(512), StaleAtOnce: r.chance(70)}
	if m.Has("vary") {
		if m.Has("accept-language") && r.chance(60) {
			p.Dims = append(p.Dims, origin.Dim{Name: "lang", How: "vary"})
		}
		if m.Has("tenant") && r.chance(30) {
			p.Dims = append(p.Dims, origin.Dim{Name: "tenant", How: "vary"})
		}
	}
	p.Gzip = m.Has("gzip") && r.chance(50)
	if m.Has("5xx") && r.chance(70) {
		p.Fail = 20 + r.rng.IntN(40)
	}
	if m.Has("slow") && r.chance(50) {
		// Slow refetches, so requests of several variants collapse.
		p.Delay = time.Duration(20+r.rng.IntN(100)) * time.Millisecond
	}
	return p
}

func (r *run) chance(pct int) bool { return r.rng.IntN(100) < pct }

func (r *run) drawProfile(idents bool) origin.Profile {
	m := r.cfg.Mix
	p := origin.Profile{Size: 64 + r.rng.IntN(r.cfg.MaxBodyBytes/4), ETag: m.Has("304") && r.chance(50)}
	if m.Has("if-none-match") {
		p.WeakETag = r.chance(30)
	}
	if m.Has("last-modified") {
		p.LastMod = r.chance(50)
	}
	dims := map[string]string{}
	if idents {
		if m.Has("vary") {
			if m.Has("tenant") && r.chance(30) {
				dims["tenant"] = "vary"
			}
			if m.Has("accept-language") && r.chance(30) {
				dims["lang"] = "vary"
			}
		}
		switch {
		case m.Has("private") && r.chance(15):
			dims["addr"] = "private"
		case m.Has("vary-xff") && r.chance(15):
			dims["addr"] = "vary"
		case m.Has("set-cookie") && r.chance(12):
			dims["addr"] = "set-cookie"
			// On a stream of its own, so the other rows' draws stay.
			if m.Has("set-cookie2") && r.cookies2.IntN(2) == 0 {
				dims["addr"] = "set-cookie2"
			}
		}
		if m.Has("per-credential") && r.chance(20) {
			if m.Has("cookie") && r.chance(50) {
				dims["cookie"] = "none"
			} else if m.Has("auth") {
				dims["auth"] = "none"
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(dims)) {
		p.Dims = append(p.Dims, r.targetedNoStore(r.strayPrivate(origin.Dim{Name: k, How: dims[k]})))
	}
	if m.Has("vary-malformed") && r.varySeps.IntN(4) == 0 {
		// On a sequence of its own (PCG stream 56): a Vary that is no
		// list of field names ("Accept-Language X-Tenant", "X-Tenant;"),
		// which must not be keyed as the one name it spells.
		p.VarySep = []string{" ", ";", " ; "}[r.varySeps.IntN(3)]
	}
	p.Gzip = m.Has("gzip") && r.chance(50)
	if p.Gzip && m.Has("gzip-threshold") && r.chance(50) {
		p.GzipFrom = 1 << 10
	}
	switch {
	case m.Has("large") && r.chance(15):
		p.Size = r.cfg.MaxBodyBytes + 1 + r.rng.IntN(r.cfg.MaxBodyBytes)
	case m.Has("large-identity") && r.chance(12):
		// Over the bound as identity, about 75 % of it gzipped.
		p.Size = r.cfg.MaxBodyBytes * 5 / 4
		p.Gzip = true
	}
	if m.Has("slow") && r.chance(35) || p.Size > r.cfg.MaxBodyBytes && r.chance(70) {
		// A large body is slow to make, so requests collapse onto it.
		p.Delay = time.Duration(20+r.rng.IntN(200)) * time.Millisecond
	}
	if m.Has("5xx") && r.chance(12) {
		p.Fail = 20 + r.rng.IntN(40)
	}
	if m.Has("hangup") && r.chance(6) {
		p.Hang = 10 + r.rng.IntN(30)
	}
	if m.Has("upstream-lie") && r.chance(8) {
		p.Lie = 20 + r.rng.IntN(40)
	}
	if m.Has("truncate") && r.chance(8) {
		p.Trunc = 20 + r.rng.IntN(40)
	}
	if m.Has("stall") && r.chance(6) {
		// Rarer than truncate: each stalled read holds its round for
		// upstream.timeout (3 s). Drawn for 32 % of profiles, the fixed
		// seeds took 100-150 s instead of 47; at 6 %, 40-54 s.
		p.Stall = 5 + r.rng.IntN(10)
	}
	if m.Has("1xx-flood") && r.chance(8) {
		p.Hints = 20
	}
	if m.Has("trailers") && r.chance(40) {
		p.Trailers = 30 + r.rng.IntN(71)
	}
	p.WriteFaults = m.Has("write-fail")
	if m.Has("write-refused") && r.chance(20) {
		p.Refuse = 30 + r.rng.IntN(40)
	}
	return p
}

// strayPrivate turns half the private dimensions into private-stray ones,
// on a sequence of their own (PCG stream 55, so the other rows' draws
// stay): the answer says private with other separators than commas
// (origin.StrayPrivate), which must keep it from being stored or shared
// as Cache-Control: private does.
func (r *run) strayPrivate(d origin.Dim) origin.Dim {
	if d.How != "private" || !r.cfg.Mix.Has("private-stray") || r.strays.IntN(2) == 0 {
		return d
	}
	d.How, d.Spelling = "private-stray", r.strays.IntN(len(origin.StrayPrivate))
	return d
}

// targetedNoStore turns a third of the private dimensions left private
// (after strayPrivate) into targeted-nostore ones, on a sequence of their
// own (PCG stream 60, so the other rows' draws stay): the per-address
// answer says Cache-Control: max-age=60 and no-store in a Surrogate-Control
// or CDN-Cache-Control (origin.TargetedNoStore), which must keep it from
// being stored or shared in either freshness mode, on every path (RFC
// 9213; Varnish's built-in VCL).
func (r *run) targetedNoStore(d origin.Dim) origin.Dim {
	if d.How != "private" || !r.cfg.Mix.Has("targeted-nostore") || r.targeted.IntN(3) != 0 {
		return d
	}
	d.How, d.Spelling = "targeted-nostore", r.targeted.IntN(len(origin.TargetedNoStore))
	return d
}

// bulkCookie turns a third of the bulk answers' per-address dimensions
// into set-cookie ones, on a sequence of its own (PCG stream 63, so the
// other rows' draws stay): the bulk answer sets a cookie minted for the
// caller's address, which makes it private (RFC 9111 §7.3), and marks
// its elements (origin.Stamp.Cookie). Each must reach only a client of
// that address, and with its cookie: the request whose call it was would
// have had it from the upstream directly (the bulk-set-cookie check).
func (r *run) bulkCookie(d origin.Dim) origin.Dim {
	if !r.cfg.Mix.Has("bulk-set-cookie") || r.bulkCookies.IntN(3) != 0 {
		return d
	}
	d.How, d.Spelling = "set-cookie", 0
	return d
}
