package origin

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
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
// marked with TrailerMark; and sometimes (hopPct) X-Trail-Hop, marked
// too, which the answer's Connection header names, so it is hop-by-hop
// (RFC 9110 §7.6.1), and X-Trail says hop=1. Either every name is
// announced in the Trailer header, or only X-Trail, or none (an
// undeclared trailer is still sent).
//
// check.Checker.Trailers holds every answer to: no forbidden name announced or
// received, nor a marked value merged into the header; an answer served
// from a store or shared with another request (hit, stale, collapsed)
// carries no trailer; no X-Trail-Hop is announced or relayed; and a
// relayed X-Trail is the one the upstream sent
// for this request: the same call as the header's, for this resource or a
// subset of this list's ids, with no identity value or request id but this
// request's own.

// TrailerField is the origin's own trailer; TrailerCall the header that
// names the call whose answer ends with trailers.
const (
	TrailerField = "X-Trail"
	TrailerCall  = "X-Trail-Call"
	TrailerMark  = "trl-"
	// HopTrailer is the trailer the answer's Connection names, hopPct
	// the share of trailer sections that send it.
	HopTrailer = "X-Trail-Hop"
	hopPct     = 30
)

// ForbiddenTrailers are the names the origin sends as trailers that a
// client must never get as such (RFC 9110 §6.5.1, §7.6.1), and the
// replicas' tag headers (stripped from every answer). Transfer-Encoding,
// Content-Length, Trailer and Host are left out: an upstream that sends
// them breaks its own framing, which is not what this checks.
var ForbiddenTrailers = []string{
	"Set-Cookie", "Cache-Control", "Content-Type", "Content-Encoding", "Authorization", "Www-Authenticate",
	"Vary", "Age", "Date", "Expires", "Location", "Retry-After", "Pragma",
	"Connection", "Keep-Alive", "Te", "Upgrade", "Proxy-Connection",
	"Surrogate-Key", "Xkey",
}

var TrailerDims = []string{"addr", "cookie", "auth", "tenant", "lang"}

// trailing is the trailer section one answer ends with.
type trailing struct {
	call    int64
	hop     bool // Connection names HopTrailer
	declare []string
	fields  [][2]string
}

// drawTrailing draws whether the answer to r ends with trailers (pct
// percent of answers), and which; what is "res=<res>" or "ids=<ids>".
// When its Connection names HopTrailer, r's body is read to its end
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
	for _, d := range TrailerDims {
		v.Set(d, TrailerValue(d, dimValue(r, d)))
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
		t.fields = append(t.fields, [2]string{HopTrailer, TrailerMark + addr})
	}
	for _, k := range ForbiddenTrailers {
		if o.rng.IntN(100) < 25 {
			val := TrailerMark + addr
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

// TrailerValue is how X-Trail spells a dimension's value: a long one
// (long-accept-language) by its hash.
func TrailerValue(dim, v string) string {
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
	h.Set(TrailerCall, fmt.Sprint(t.call))
	if t.hop {
		h.Add("Connection", strings.ToLower(HopTrailer)) // any case names it
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
