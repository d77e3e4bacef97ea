package traffic

import (
	"net/http"
	"strings"

	"github.com/sidecache/sidecache/internal/invariant/origin"
)

// The HTTP edge inputs of issue 21 that can shape an answer on the cached
// path, each drawn at a low rate: Range (bypassed, and never stored as the
// whole), absolute-form targets (RFC 9112 §3.2.2: the authority replaces
// Host), writes with a body sent chunked with trailers or behind Expect:
// 100-continue, a field the client's Connection names (hop-by-hop: it
// must reach no upstream call), the target * on a method other than
// OPTIONS (RFC 9112 §3.2.4: refused, never forwarded), and duplicate field lines of the headers an answer varies
// on. Percent-encoded path spellings and odd Accept-Encoding lists are
// drawn with the paths and headers (draw.go).

// drawEdges draws the request-line and framing edges of q.
func (g *Gen) drawEdges(q *Request) {
	m := g.mix
	if q.Method == http.MethodGet && m.Has("range") && g.chance(4) {
		q.Hdr.Set("Range", pick(g, "bytes=0-9", "bytes=-5", "bytes=0-0,5-9", "bytes=10-"))
	}
	if m.Has("absolute-form") && g.chance(5) {
		q.Absolute = true
		if q.Route == "h" && q.Host == "" {
			q.Host = pick(g, g.host, "svc", "SVC.Invariant")
		}
		if q.Host == "" {
			q.Host = g.host
		}
	}
	if q.Method == http.MethodGet && !q.Absolute && m.Has("half-close") && g.chance(6) {
		q.HalfClose = true
	}
	if m.Has("connection-hop") && g.chance(8) {
		// One list element among others, as a client may send it.
		q.Hdr.Set("Connection", pick(g, origin.ClientHop, "keep-alive, "+origin.ClientHop, "x-client-hop"))
		q.Hdr.Set(origin.ClientHop, "hop")
	}
	if m.Has("underscore-forwarding") && g.chance(8) {
		// Spellings a CGI-style upstream folds onto the sidecar's own
		// X-Forwarded-* and X-Real-Ip, or onto a keyed X-Tenant: the
		// edge drops them (origin.Underscored records any that arrive).
		q.Hdr["X_Forwarded_For"] = []string{"6.6.6.6"}
		q.Hdr[pick(g, "X-Forwarded_Host", "x_forwarded_host")] = []string{"evil.example"}
		q.Hdr[pick(g, "X_Real_Ip", "X_REAL_IP", "X_Tenant")] = []string{"6.6.6.6"}
		// And the address claims themselves: applications behind NGINX
		// trust X-Real-Ip; the sidecar writes its own from its peer and
		// drops True-Client-Ip, Client-Ip and the like
		// (origin.ForgedAddress records any).
		// Set without a draw, so the run's other draws stay as they were.
		q.Hdr["X-Real-Ip"] = []string{origin.ForgedAddr}
		q.Hdr["True-Client-Ip"] = []string{origin.ForgedAddr}
		q.Hdr["Client-Ip"] = []string{origin.ForgedAddr}
		q.Hdr["X-Originating-Ip"] = []string{origin.ForgedAddr}
		q.Hdr["X-Forwarded-Port"] = []string{origin.ForgedAddr}
	}
	if !q.Absolute && !q.HalfClose && !q.Hangup && m.Has("asterisk-form") && g.chance(2) {
		q.Asterisk = true
	}
	if q.Method == http.MethodPatch {
		if m.Has("chunked-write") && g.chance(15) {
			q.Body, q.Chunked = `{"bump":1}`, true
		}
		if m.Has("expect") && g.chance(15) {
			q.Body, q.Expect = `{"bump":1}`, true
		}
	}
	if m.Has("obs-fold") && g.folds.IntN(100) < 3 && !q.Absolute && !q.HalfClose && !q.Hangup && !q.Asterisk && !q.Chunked && !q.Expect {
		q.Folded = true
		if m.Has("obs-fold-lead") {
			q.Lead, q.LeadKind = g.foldLead()
		}
	}
}

// drawDuplicates sends a header the origin may vary on as two field
// lines (RFC 9110 §5.3: one list, joined with commas): another value
// after the client's own, or an empty line before it. The origin joins
// every non-empty line (dimValue), so what the client sent is that join;
// a sidecar that keyed on the first line only, or forwarded only it,
// would serve one list's answer to another.
func (g *Gen) drawDuplicates(q *Request) {
	h := q.Hdr
	switch pick(g, "lang", "tenant", "encoding") {
	case "lang":
		if lang := h.Get("Accept-Language"); lang != "" && len(lang) < 100 {
			h["Accept-Language"] = []string{lang, pick(g, "en", "fr", "de")}
			if g.chance(30) {
				h["Accept-Language"] = []string{"", lang}
			}
			q.Sent["lang"] = origin.JoinLines(h["Accept-Language"])
		}
	case "tenant":
		if t := h.Get("X-Tenant"); t != "" {
			h["X-Tenant"] = []string{t, pick(g, "acme", "globex", "initech")}
			if g.chance(30) {
				h["X-Tenant"] = []string{"", t}
			}
			q.Sent["tenant"] = origin.JoinLines(h["X-Tenant"])
		}
	default:
		h["Accept-Encoding"] = pick2(g, []string{"identity", "gzip"}, []string{"", "gzip"}, []string{"gzip;q=0", "identity"})
	}
}

func pick2(g *Gen, s ...[]string) []string { return s[g.rng.IntN(len(s))] }

// connectionDims are the headers nameInConnection may name, with the
// dimension each is in q.Sent.
var connectionDims = [...]struct{ header, dim string }{
	{"Accept-Language", "lang"}, {"X-Tenant", "tenant"}, {"Cookie", "cookie"}, {"Authorization", "auth"},
}

// nameInConnection names in q's Connection one of the headers it carries
// that the key holds or an answer varies on, in any case: hop-by-hop
// (RFC 9110 §7.6.1), so the origin receives none of it, and the answer
// q gets is the one made without it (q.Sent says so). A sidecar that
// keyed on the value sent while forwarding without it would store the
// answer made for no tenant as a tenant's: that tenant's next request
// reads it, and the identity check sees it.
func (g *Gen) nameInConnection(q *Request) {
	var have []int
	for i, d := range connectionDims {
		if q.Hdr.Get(d.header) != "" {
			have = append(have, i)
		}
	}
	if len(have) == 0 {
		return
	}
	d := connectionDims[have[g.rng.IntN(len(have))]]
	name := pick(g, d.header, strings.ToLower(d.header), strings.ToUpper(d.header))
	if c := q.Hdr.Get("Connection"); c != "" {
		name = c + ", " + name
	}
	q.Hdr.Set("Connection", name)
	q.Sent[d.dim] = ""
}
