package invariant

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Response trailers (feature "trailers"). On a drawn share of its answers
// (reads, their 500/503s, bulk answers and their failures) the origin ends
// the body, sent chunked, with trailers: X-Trail, which names the call
// (X-Trail-Call in the same answer's header), what it answered for (res or
// ids) and whom, as the origin saw each identity dimension and the
// X-Request-Id; and fields that may never be relayed as trailers (RFC 9110
// §6.5.1: framing, controls, authentication, cookies, response control
// data, hop-by-hop fields; the tag headers the sidecar strips), each value
// marked with trailerMark; and sometimes (hopPct) X-Trail-Hop, marked
// too, which the answer's Connection header names, so it is hop-by-hop
// (RFC 9110 §7.6.1), and X-Trail says hop=1. Either every name is
// announced in the Trailer header, or only X-Trail, or none (an
// undeclared trailer is still sent).
//
// checkTrailers holds every answer to: no forbidden name announced or
// received, nor a marked value merged into the header; an answer served
// from a store or shared with another request (hit, stale, collapsed)
// carries no trailer; no X-Trail-Hop is announced or relayed; and a
// relayed X-Trail is the one the upstream sent
// for this request: the same call as the header's, for this resource or a
// subset of this list's ids, with no identity value or request id but this
// request's own.

// TrailerField is the origin's own trailer; trailerCall the header that
// names the call whose answer ends with trailers.
const (
	TrailerField = "X-Trail"
	trailerCall  = "X-Trail-Call"
	trailerMark  = "trl-"
	// hopTrailer is the trailer the answer's Connection names, hopPct
	// the share of trailer sections that send it.
	hopTrailer = "X-Trail-Hop"
	hopPct     = 30
)

// forbiddenTrailers are the names the origin sends as trailers that a
// client must never get as such (RFC 9110 §6.5.1, §7.6.1), and the
// replicas' tag headers (stripped from every answer). Transfer-Encoding,
// Content-Length, Trailer and Host are left out: an upstream that sends
// them breaks its own framing, which is not what this checks.
var forbiddenTrailers = []string{
	"Set-Cookie", "Cache-Control", "Content-Type", "Content-Encoding", "Authorization", "Www-Authenticate",
	"Vary", "Age", "Date", "Expires", "Location", "Retry-After", "Pragma",
	"Connection", "Keep-Alive", "Te", "Upgrade", "Proxy-Connection",
	"Surrogate-Key", "Xkey",
}

var trailerDims = []string{"addr", "cookie", "auth", "tenant", "lang"}

// trailing is the trailer section one answer ends with.
type trailing struct {
	call    int64
	hop     bool // Connection names hopTrailer
	declare []string
	fields  [][2]string
}

// drawTrailing draws whether the answer to r ends with trailers (pct
// percent of answers), and which; what is "res=<res>" or "ids=<ids>".
// When its Connection names hopTrailer, r's body is read to its end
// first: net/http's server replaces the Connection field with "close"
// when it closes after an answer whose request body was left unread (a
// PATCH the read handler answers), and the field must reach the sidecar
// as the origin set it.
func (o *Origin) drawTrailing(r *http.Request, pct int, what url.Values) *trailing {
	t := o.drawTrailer(r, pct, what)
	if t != nil && t.hop && r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
	}
	return t
}

func (o *Origin) drawTrailer(r *http.Request, pct int, what url.Values) *trailing {
	if pct == 0 || r.Method == http.MethodHead {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.rng.IntN(100) >= pct {
		return nil
	}
	o.trailCalls++
	t := &trailing{call: o.trailCalls}
	v := url.Values{"call": {fmt.Sprint(t.call)}}
	for k, vs := range what {
		v[k] = vs
	}
	for _, d := range trailerDims {
		v.Set(d, trailerValue(d, dimValue(r, d)))
	}
	if rid := r.Header.Get("X-Request-Id"); rid != "" {
		v.Set("rid", rid)
	}
	addr := dimValue(r, "addr")
	if t.hop = o.rng.IntN(100) < hopPct; t.hop {
		v.Set("hop", "1")
	}
	t.fields = append(t.fields, [2]string{TrailerField, v.Encode()})
	if t.hop {
		t.fields = append(t.fields, [2]string{hopTrailer, trailerMark + addr})
	}
	for _, k := range forbiddenTrailers {
		if o.rng.IntN(100) < 25 {
			val := trailerMark + addr
			if k == "Set-Cookie" {
				val = "t=" + val + "; Path=/"
			}
			t.fields = append(t.fields, [2]string{k, val})
		}
	}
	switch o.rng.IntN(3) {
	case 0: // every name announced
		for _, f := range t.fields {
			t.declare = append(t.declare, f[0])
		}
	case 1:
		t.declare = []string{TrailerField}
	}
	return t
}

// trailerValue is how X-Trail spells a dimension's value: a long one
// (long-accept-language) by its hash.
func trailerValue(dim, v string) string {
	if len(v) > 64 {
		return fmt.Sprintf("#%x", fnv([]byte(v)))
	}
	return v
}

// header announces the trailers; before the header is written, and in
// place of a Content-Length (a trailer needs the chunked coding).
func (t *trailing) header(h http.Header) {
	if t == nil {
		return
	}
	h.Del("Content-Length")
	h.Set(trailerCall, fmt.Sprint(t.call))
	if t.hop {
		h.Add("Connection", strings.ToLower(hopTrailer)) // any case names it
	}
	if len(t.declare) > 0 {
		h.Set("Trailer", strings.Join(t.declare, ", "))
	}
}

// send sends the trailers after the body: flushed first, so that a small
// body is not given a Content-Length, then each field under
// http.TrailerPrefix, which net/http sends whether announced or not.
func (t *trailing) send(w http.ResponseWriter) {
	if t == nil {
		return
	}
	_ = http.NewResponseController(w).Flush()
	h := w.Header()
	for _, f := range t.fields {
		delete(h, f[0]) // a header field of the same name (Set-Cookie) is not a trailer
		h.Add(http.TrailerPrefix+f[0], f[1])
	}
}

// checkTrailers checks the trailers of an answer whose body was read.
func (r *run) checkTrailers(q *request, resp *http.Response) {
	cs := resp.Header.Get("Cache-Status")
	for k, vs := range resp.Header {
		for _, v := range vs {
			if strings.Contains(v, trailerMark) || k == TrailerField {
				r.violate("trailer-merged", "%s: header %s: %.80q came as a trailer (%s)", q, k, v, cs)
			}
		}
	}
	// A Trailer field net/http left in the header (an answer with a
	// Content-Length, such as a stored one) announces names as well.
	for _, line := range resp.Header.Values("Trailer") {
		for n := range strings.SplitSeq(line, ",") {
			if n = http.CanonicalHeaderKey(strings.TrimSpace(n)); slices.Contains(forbiddenTrailers, n) || n == hopTrailer {
				r.violate("trailer-filter", "%s: Trailer field announces %s (%s)", q, n, cs)
			}
		}
		if shared(cs) {
			r.mu.Lock()
			r.rep.Checked["trailer-announced-shared"]++
			r.mu.Unlock()
		}
	}
	sent := resp.Header.Get(trailerCall) != ""
	var got []string
	for k := range resp.Trailer {
		if k == hopTrailer {
			r.violate("trailer-hop", "%s: trailer %s, named in the upstream's Connection, relayed: %q (%s)", q, k, resp.Trailer[k], cs)
		} else if slices.Contains(forbiddenTrailers, k) {
			r.violate("trailer-filter", "%s: trailer %s relayed (announced or sent: %q) (%s)", q, k, resp.Trailer[k], cs)
		}
		if k != TrailerField {
			for _, v := range resp.Trailer[k] {
				if strings.Contains(v, trailerMark) {
					r.violate("trailer-filter", "%s: trailer %s: %q relayed (%s)", q, k, v, cs)
				}
			}
		}
		got = append(got, k)
	}
	tv := resp.Trailer.Values(TrailerField)
	fwd := cacheFwd(cs)
	r.mu.Lock()
	if sent {
		r.rep.Checked["trailer-sent-"+fwd]++
	}
	if len(tv) > 0 {
		r.rep.Checked["trailer-got-"+fwd]++
		if hv, _ := url.ParseQuery(tv[0]); hv.Get("hop") == "1" {
			r.rep.Checked["trailer-hop-"+fwd]++
		}
	}
	r.mu.Unlock()
	if len(got) == 0 {
		return
	}
	if shared(cs) {
		r.violate("trailer-shared", "%s: trailers %v on an answer served from a store or shared (%s)", q, got, cs)
	}
	if len(tv) == 0 {
		return
	}
	if len(tv) > 1 {
		r.violate("trailer-own", "%s: %d %s trailers: %q (%s)", q, len(tv), TrailerField, tv, cs)
	}
	v, err := url.ParseQuery(tv[0])
	if err != nil {
		r.violate("trailer-own", "%s: %s %q: %v", q, TrailerField, tv[0], err)
		return
	}
	if c := resp.Header.Get(trailerCall); v.Get("call") != c {
		r.violate("trailer-own", "%s: trailer of call %s on the answer of call %q (%s)", q, v.Get("call"), c, cs)
	}
	for _, d := range trailerDims {
		if got, want := v.Get(d), trailerValue(d, q.sent[d]); got != "" && got != want {
			r.violate("trailer-identity", "%s: trailer for %s=%.40q, this request sent %.40q (%s)", q, d, got, want, cs)
		}
	}
	if rid := v.Get("rid"); strings.HasPrefix(rid, "rid-") && rid != q.rid {
		r.violate("trailer-own", "%s: trailer of X-Request-Id %q (%s)", q, rid, cs)
	}
	if res := v.Get("res"); res != "" && res != q.res {
		r.violate("trailer-own", "%s: trailer of the answer for %s, want %s (%s)", q, res, q.res, cs)
	}
	if ids := v.Get("ids"); ids != "" {
		own := q.ids
		if q.kind != "list" {
			own = []string{strings.TrimPrefix(q.res, "u/")}
		}
		for id := range strings.SplitSeq(ids, ",") {
			if !slices.Contains(own, id) {
				r.violate("trailer-own", "%s: trailer of the bulk call for %s (%s)", q, ids, cs)
				break
			}
		}
	}
}

// shared: Cache-Status says the answer came from a store (hit, stale) or
// was another request's fetch (collapsed).
func shared(cs string) bool {
	return strings.Contains(cs, "; hit") || strings.Contains(cs, "fwd=stale") || strings.Contains(cs, "; collapsed")
}

// cacheFwd names the answer's path for the report's counts: hit, or the
// fwd parameter with too-large and batch told apart.
func cacheFwd(cs string) string {
	switch {
	case strings.Contains(cs, "; hit"):
		return "hit"
	case strings.Contains(cs, "too-large"):
		return "too-large"
	case strings.Contains(cs, "batch"):
		return "batch"
	case strings.Contains(cs, "; collapsed"):
		return "collapsed"
	}
	_, f, ok := strings.Cut(cs, "fwd=")
	if !ok {
		return "none"
	}
	f, _, _ = strings.Cut(f, ";")
	return f
}
