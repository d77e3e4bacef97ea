package traffic

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/sidecache/sidecache/internal/invariant/origin"
)

// Draw draws the next request; hot is the round's hot resource id.
func (g *Gen) Draw(hot string) *Request {
	m := g.mix
	who := g.ids[g.rng.IntN(len(g.ids))]
	q := &Request{
		Who: who, Replica: g.rng.IntN(g.replicas), Method: http.MethodGet, Hdr: http.Header{},
		Sent: map[string]string{"addr": who.Addr, "cookie": "", "auth": "", "tenant": "", "lang": ""},
		Kind: "read", Route: "r", Budget: BudgetRead,
	}
	id := hot
	if g.chance(35) {
		id = fmt.Sprint(1 + g.rng.IntN(4))
	}
	roll := g.rng.IntN(100)
	switch {
	case m.Has("write") && roll < 12:
		q.Kind, q.Method, q.Budget = "write", http.MethodPatch, BudgetWrite
		q.Path = "/r/" + id
		if m.Has("write-spelling") && g.chance(40) {
			q.Path = pick(g, "/r/0"+id, "/r/"+id+"/", "/R/"+id, "//r/"+id, "/r/./"+id, "/r/"+id+";v=1", "/r/%2B"+id)
		}
		if m.Has("percent-path") && g.chance(10) {
			// RFC 3986 §6.2.2.2: %3N is the digit N; the origin decodes it.
			q.Path = pick(g, "/r/%3"+id, "/%72/"+id, "/r/%2e/"+id)
		}
		q.Hangup = m.Has("write-hangup") && g.chance(15)
		if m.Has("no-cache") && g.chance(20) {
			q.Path = "/n/" + id // the route that honours no-cache
		}
	case roll < 18:
		q.Route = "t"
		name := "plain"
		if m.Has("write-non-utf8") && g.chance(60) {
			name = "caf%E9"
		}
		q.Path = "/t/" + name
		if m.Has("write") && g.chance(25) {
			q.Kind, q.Method, q.Budget = "write", http.MethodPatch, BudgetWrite
		}
	case m.Has("batch") && roll < 28:
		q.Route = "u"
		uid := fmt.Sprint(1 + g.rng.IntN(8))
		if m.Has("bad-ids") && g.chance(15) {
			uid = "99999999999999999999"
		}
		q.Path = "/u/" + uid
	case m.Has("batch") && roll < 34:
		q.Kind, q.Route, q.Path = "list", "u", "/u"
		n := 1 + g.rng.IntN(40)
		bad := 10
		if g.chance(50) {
			bad = 90
		}
		for i := 0; i < n; i++ {
			uid := fmt.Sprint(1 + g.rng.IntN(64))
			if m.Has("bad-ids") && g.chance(bad) {
				uid = fmt.Sprintf("9%019d", g.rng.Uint64()%1e19)
			}
			q.Ids = append(q.Ids, uid)
		}
		q.Ids = Distinct(q.Ids)
		if again := g.rng.IntN(100); m.Has("if-none-match") && len(g.lists) > 0 && again < 40 {
			// The same list again, so a client may revalidate it (the
			// split list's ETag is the sidecar's, over the bytes).
			q.Ids = g.lists[again%len(g.lists)]
		} else if len(g.lists) < 8 && !slices.ContainsFunc(q.Ids, func(id string) bool { return !origin.GoodID("/" + id) }) {
			g.lists = append(g.lists, q.Ids) // good ids only: a list that fails has no ETag
		}
		q.Query = "ids=" + strings.Join(q.Ids, ",")
		q.Budget = BudgetList(len(q.Ids))
	case m.Has("no-cache") && roll < 38:
		// freshness: origin, request_no_cache: refresh: no-cache reads
		// are forced refreshes, one per key at a time.
		q.Route, q.Path = "n", "/n/"+id
	case roll < 45:
		q.Route, q.Path = "p", "/p/"+id
		q.Query = "fields=" + pick(g, "name", "email")
		if m.Has("extra-param") && g.chance(50) {
			q.Query += "&callback=cb" + fmt.Sprint(g.rng.IntN(1000))
		}
	case m.Has("host-spelling") && roll >= 92:
		q.Route, q.Path = "h", "/h/"+id
		q.Host = pick(g, g.host, "svc", "svc.ns.svc.cluster.local", strings.ToUpper(g.host))
	case m.Has("batch-etag-field") && roll >= 86:
		// batch.etag_field: the element's ETag is the app's own field.
		q.Route, q.Path = "e", "/e/"+fmt.Sprint(1+g.rng.IntN(8))
		if m.Has("write") && g.chance(20) {
			q.Kind, q.Method, q.Budget = "write", http.MethodPatch, BudgetWrite
		}
	default:
		q.Path = "/r/" + id
		if m.Has("path-spelling") && g.chance(15) {
			q.Path = pick(g, "/r/0"+id, "/r/"+id+"/", "/R/"+id)
		}
		if m.Has("percent-path") && g.chance(6) {
			q.Path = pick(g, "/r/%3"+id, "/%72/"+id, "/r/%2e/"+id, "/r/"+id+"%2F")
		}
		q.Query = g.drawQuery()
		if m.Has("head") && g.chance(15) {
			q.Method = http.MethodHead // a GET route answers HEAD from its GET entry
		}
		if m.Has("stale-if-error") && g.chance(30) {
			// Route n's stale copies (the runner's drawStaleProfile) need
			// reads, of several variants at once, to be served on its
			// failures.
			q.Route, q.Path = "n", "/n/"+id
		}
		if m.Has("keyed-headers") && g.chance(20) {
			q.Route, q.Path = "k", "/k/"+id // key.headers: X-Tenant, Accept-Language
		}
	}
	g.drawLenient(q, id)
	g.drawOverride(q, id) // override.go
	if q.Kind != "list" {
		q.Res = origin.Resource(q.Path)
	}
	g.drawEdges(q)
	g.drawHeaders(q)
	if m.Has("connection-keyed") && (g.chance(6) || q.Route == "k" && g.chance(25)) {
		g.nameInConnection(q)
	}
	if q.Method == http.MethodGet {
		g.drawConditional(q)
	}
	g.drawExpectRead(q)
	g.drawMethodCase(q) // methodcase.go
	return q
}

// drawExpectRead makes about one read or list in twenty say Expect:
// 100-continue with no body (expect-read), on a sequence of its own
// (stream 35), so the other draws are unchanged: net/http sends no 100
// to a request without a body, and nothing may forward the Expect (the
// origin records any that arrives: Origin.TakeExpects). The requests
// written by hand with odd framing are left as they are.
func (g *Gen) drawExpectRead(q *Request) {
	roll := g.expects.IntN(100)
	if !g.mix.Has("expect-read") || roll >= 5 || q.Kind == "write" || q.Asterisk || q.Folded || q.HalfClose {
		return
	}
	q.Hdr.Set("Expect", "100-continue")
}

// AgentRequest is a read of route a (vary-user-agent), whose answers
// Vary: User-Agent, drawn from rng, the runner's own sequence for the
// row, so that it moves no draw of the others. Ids 1-3, so reads share
// variants round after round; the identity's own User-Agent, one every
// identity sends, or an empty one, which Go's client sends as none (so
// does the sidecar: none went, none is what the answer may be made for);
// GET or HEAD; no credentials (they bypass the cache).
func (g *Gen) AgentRequest(rng *rand.Rand) *Request {
	who := g.ids[rng.IntN(len(g.ids))]
	q := &Request{
		Who: who, Replica: rng.IntN(g.replicas), Method: http.MethodGet, Hdr: http.Header{},
		Sent: map[string]string{"addr": who.Addr, "cookie": "", "auth": "", "tenant": "", "lang": "", "ua": ""},
		Kind: "read", Route: "a", Budget: BudgetRead,
	}
	ua := []string{strings.ToLower(who.Name) + "-agent/1.0", "shared-agent/2.0", ""}[rng.IntN(3)]
	q.Hdr["User-Agent"] = []string{ua}
	q.Sent["ua"] = ua
	if rng.IntN(100) < 15 {
		q.Method = http.MethodHead
	}
	q.Path = "/a/" + fmt.Sprint(1+rng.IntN(3))
	q.Res = origin.Resource(q.Path)
	return q
}

func pick(g *Gen, s ...string) string { return s[g.rng.IntN(len(s))] }

// drawLenient draws, on its own stream (Gen.lenient), the spellings of a
// write to /r/{id} the origin reads as id (write-lenient-id), the code
// the origin answers an applied write with (write-applied-other: the
// answer= instruction, origin.AppliedAnswer), and reads of /r/{id}/summary
// (route-tagged-read); and on stream 39 (Gen.multi) the spellings stacks
// read differently (multiSpelling), for writes and for reads of both
// rows. It draws the same number of times for every request, so which
// rows are on changes no other draw.
func (g *Gen) drawLenient(q *Request, id string) {
	m := g.mix
	spell, answer, summary := g.lenient.IntN(100), g.lenient.IntN(100), g.lenient.IntN(100)
	which := g.lenient.IntN(15)
	mspell, mread, mkind := g.multi.IntN(100), g.multi.IntN(100), g.multi.IntN(multiSpellings)
	if !strings.HasPrefix(q.Path, "/r/") {
		return
	}
	if q.Kind == "write" {
		if m.Has("write-lenient-id") && spell < 30 {
			q.Path = "/r/" + [...]string{"%20" + id, id + "%20", "%09" + id, id + "-acme", "0" + id + "-x"}[which%5]
		}
		if m.Has("write-lenient-id") && mspell < 20 {
			q.Path = "/r/" + multiSpelling(id, mkind)
		}
		if m.Has("write-applied-other") && answer < 25 {
			q.Query = "answer=" + [...]string{"303", "502", "504"}[which%3]
		}
		if m.Has("route-tagged-read") && (q.Path != "/r/"+id || q.Query != "") {
			// Read before and after the write through its replica
			// (respell.go): a copy only r:{id} reaches.
			q.Tagged, q.Budget = "/r/"+id+"/summary", q.Budget+2*BudgetRead
		}
		return
	}
	if m.Has("route-tagged-read") && summary < 20 && q.Path == "/r/"+id && q.Route == "r" {
		q.Path += "/summary"
	}
	if m.Has("route-tagged-read") && mread < 15 && q.Route == "r" && (q.Path == "/r/"+id || q.Path == "/r/"+id+"/summary") {
		// Strict for storage: a read through a spelling the origin
		// reads as id, which the sidecar must not store where a write
		// to /r/{id} leaves it (routes r and r-summary take only
		// [1-9][0-9]*, so it passes through: the proxy's
		// TestMultiReadingReadNotStored holds an unconstrained route
		// to it).
		q.Path = strings.Replace(q.Path, "/r/"+id, "/r/"+multiSpelling(id, mkind), 1)
	}
}

// multiSpellings is how many ways multiSpelling spells an id.
const multiSpellings = 13

// multiSpelling is id (a decimal) spelled the k-th way of those stacks
// read differently or only some read as a number (internal/spelling.
// AppendInts), each one the origin reads as id (origin.Resource):
// PostgreSQL 16+ and JavaScript's 0x, 0o and 0b prefixes (Ruby and MySQL
// read 0), underscores between digits (PostgreSQL, Python, Ruby; parseInt
// reads the digits before), full-width digits (Python's int()), and
// U+00A0, U+FEFF and U+3000 around it (Python or JavaScript skip them),
// percent-encoded, a decimal with a fraction or an exponent ("0.5e1",
// "50e-1", "500E-2": JavaScript's Number, MySQL's comparison and PHP's
// (int) read its value, parseInt and Ruby its leading digits), and one
// in front of a slug ("50e-1-x": MySQL's comparison and PHP's (int) read
// the number in front, 5; Ruby's to_i, Rails' find and parseInt 50).
func multiSpelling(id string, k int) string {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		return id
	}
	switch k % multiSpellings {
	case 0:
		return "0x" + strconv.FormatUint(n, 16)
	case 1:
		return "0X" + strings.ToUpper(strconv.FormatUint(n, 16))
	case 2:
		return "0o" + strconv.FormatUint(n, 8)
	case 3:
		return "0b" + strconv.FormatUint(n, 2)
	case 4:
		if len(id) > 1 {
			return id[:1] + "_" + id[1:]
		}
		return "0_" + id
	case 5:
		var b strings.Builder
		for _, d := range id {
			fmt.Fprintf(&b, "%%EF%%BC%%%02X", 0x90+d-'0') // U+FF10 + d
		}
		return b.String()
	case 6:
		return "%C2%A0" + id
	case 7:
		return "%EF%BB%BF" + id
	case 8:
		return "%E3%80%80" + id + "%E3%80%80"
	case 9:
		// A fraction and an exponent: 5 to JavaScript's Number, MySQL's
		// comparison and PHP's (int); 0 to Ruby's to_i and parseInt.
		return "0." + id + "e" + strconv.Itoa(len(id))
	case 10:
		return id + "0e-1" // 50e-1: 5 to Number, 50 to parseInt
	case 11:
		return id + "00E-2"
	default:
		return id + "0e-1-x" // 50e-1-x: 5 to PHP's (int), 50 to Rails' find
	}
}

func (g *Gen) drawQuery() string {
	m := g.mix
	if !g.chance(35) {
		return ""
	}
	parts := []string{"a=1", "b=2"}
	if m.Has("query-order") && g.chance(50) {
		parts = []string{"b=2", "a=1"}
	}
	if m.Has("query-repeat") && g.chance(50) {
		if g.chance(50) {
			parts = append(parts, "lang=fr", "lang=en")
		} else {
			parts = append(parts, "lang=en", "lang=fr")
		}
	}
	if m.Has("query-escape") && g.chance(50) {
		parts = append(parts, pick(g, "q=%zz", "q=%25zz", "c=1;d=2", "c=1%3Bd=2"))
	}
	return strings.Join(parts, "&")
}

func (g *Gen) drawHeaders(q *Request) {
	m := g.mix
	h := q.Hdr
	if m.Has("accept-encoding") {
		choices := []string{"", "gzip", "identity", "gzip;q=0", "gzip, br"}
		if m.Has("accept-encoding-spellings") {
			choices = append(choices, "gzip, deflate", "gzip, deflate, br", "gzip, deflate, br, zstd", "br, gzip")
		}
		if m.Has("accept-encoding-q") && g.chance(15) {
			choices = []string{"gzip;q=0.001", "identity;q=0, gzip", "*;q=0", "GZIP", "gzip;q=1.0, *;q=0", "*",
				"x-gzip", "gzip ; q=0", "deflate;q=0.5, gzip;q=0", "*, gzip;q=0", "gzip;q=0.000", "br;q=1, gzip;q=0.5", "gzip;Q=0"}
		}
		if ae := pick(g, choices...); ae != "" {
			h.Set("Accept-Encoding", ae)
		}
	}
	if m.Has("accept-language") {
		lang := pick(g, "", "en", "fr", "de")
		if m.Has("long-accept-language") && g.chance(5) {
			lang = strings.Repeat("en-GB;q=0.9, ", 500) + "fr"
		}
		if lang != "" {
			h.Set("Accept-Language", lang)
			q.Sent["lang"] = lang
		}
	}
	if m.Has("tenant") && q.Who.Tenant != "" && g.chance(70) {
		h.Set("X-Tenant", q.Who.Tenant)
		q.Sent["tenant"] = q.Who.Tenant
	}
	if m.Has("duplicate-headers") && g.chance(8) {
		g.drawDuplicates(q)
	}
	if m.Has("cookie") && g.chance(25) {
		h.Set("Cookie", "sid="+q.Who.Name)
		if m.Has("cookie-empty-first") && q.Route == "p" && g.chance(60) {
			h["Cookie"] = []string{"", "sid=" + q.Who.Name}
		}
		q.Sent["cookie"] = q.Who.Name
	}
	if m.Has("auth") && g.chance(15) {
		h.Set("Authorization", "Bearer "+q.Who.Name)
		if m.Has("cookie-empty-first") && q.Route == "p" && g.chance(60) {
			h["Authorization"] = []string{"", "Bearer " + q.Who.Name}
		}
		q.Sent["auth"] = q.Who.Name
	}
	if m.Has("request-id") && g.chance(50) {
		g.rid++
		q.Rid = fmt.Sprintf("rid-%d-%d", g.seed, g.rid)
		h.Set("X-Request-Id", q.Rid)
	}
	if m.Has("no-cache") && g.chance(10) {
		switch pick(g, "no-cache", "max-age=0", "pragma") {
		case "pragma":
			h.Set("Pragma", "no-cache")
		case "max-age=0":
			h.Set("Cache-Control", "max-age=0")
		default:
			h.Set("Cache-Control", "no-cache")
		}
	}
}

// CrowdRequest is a GET of the batch route by a random identity through a
// random replica, with the headers that split batches into groups
// (Accept-Encoding, X-Tenant) and no credentials (which would bypass the
// batcher).
func (g *Gen) CrowdRequest(rng *rand.Rand) *Request {
	who := g.ids[rng.IntN(len(g.ids))]
	q := &Request{
		Who: who, Replica: rng.IntN(g.replicas), Method: http.MethodGet, Hdr: http.Header{},
		Sent: map[string]string{"addr": who.Addr, "cookie": "", "auth": "", "tenant": "", "lang": ""},
		Kind: "read", Route: "u", Budget: BudgetRead, Crowd: true,
	}
	if ae := []string{"", "gzip", "identity", "gzip, deflate, br"}[rng.IntN(4)]; ae != "" {
		q.Hdr.Set("Accept-Encoding", ae)
	}
	if who.Tenant != "" && rng.IntN(2) == 0 {
		q.Hdr.Set("X-Tenant", who.Tenant)
		q.Sent["tenant"] = who.Tenant
	}
	return q
}

// StaleRequest is a read or a split list of route s (split-stale,
// bulk-206: a batch route with stale_if_error whose bulk endpoint fails,
// answers 206 or private), drawn from rng, the runner's own sequence for
// these rows, so that they move no draw of the others. Ids 1-6, so lists
// and reads share them round after round and stale copies are held; no
// credentials (they bypass the cache), Accept-Language (route s's key
// holds it) or none, so stale copies of several variants are held at
// once; X-Tenant with bulk-vary-withheld.
func (g *Gen) StaleRequest(rng *rand.Rand) *Request {
	who := g.ids[rng.IntN(len(g.ids))]
	q := &Request{
		Who: who, Replica: rng.IntN(g.replicas), Method: http.MethodGet, Hdr: http.Header{},
		Sent: map[string]string{"addr": who.Addr, "cookie": "", "auth": "", "tenant": "", "lang": ""},
		Kind: "read", Route: "s", Budget: BudgetRead,
	}
	if lang := []string{"", "", "", "", "en", "fr"}[rng.IntN(6)]; lang != "" && g.mix.Has("accept-language") {
		q.Hdr.Set("Accept-Language", lang)
		q.Sent["lang"] = lang
	}
	if g.mix.Has("bulk-vary-withheld") && who.Tenant != "" && rng.IntN(2) == 0 {
		q.Hdr.Set("X-Tenant", who.Tenant)
		q.Sent["tenant"] = who.Tenant
	}
	if rng.IntN(100) < 40 {
		q.Path = "/s/" + fmt.Sprint(1+rng.IntN(6))
		q.Res = origin.Resource(q.Path)
		return q
	}
	q.Kind, q.Path = "list", "/s"
	for range 1 + rng.IntN(6) {
		q.Ids = append(q.Ids, fmt.Sprint(1+rng.IntN(6)))
	}
	q.Ids = Distinct(q.Ids)
	q.Query = "ids=" + strings.Join(q.Ids, ",")
	q.Budget = BudgetList(len(q.Ids))
	return q
}

// Distinct is ids each once, at its first position: a list the sidecar
// assembles per id. One that names an id twice passes through to the
// origin whole (the list-as-asked row draws those, AsAsked), as the
// sidecar cannot know whether its upstream lists it once or twice. The
// draws are the same either way, so a seed's other requests are too.
func Distinct(ids []string) []string {
	out := ids[:0]
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// AsAsked makes q, a list, name one of its ids twice, or spell one with a
// leading zero (05, which the origin reads as 5, and which is not the
// spelling the sidecar stores), drawn from rng: a list the sidecar must
// pass through whole (list-as-asked). q's ids are copied first, as the
// revalidation pool may hold them.
func AsAsked(q *Request, rng *rand.Rand) {
	ids := slices.Clone(q.Ids)
	i := rng.IntN(len(ids))
	if rng.IntN(2) == 0 {
		j := rng.IntN(len(ids) + 1)
		ids = slices.Insert(ids, j, ids[i])
	} else {
		ids[i] = "0" + ids[i]
	}
	q.Ids = ids
	q.Query = "ids=" + strings.Join(ids, ",")
}
