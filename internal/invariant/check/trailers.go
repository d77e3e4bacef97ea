package check

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// Trailers checks the trailers of an answer whose body was read.
func (ch *Checker) Trailers(q *traffic.Request, resp *http.Response) {
	cs := resp.Header.Get("Cache-Status")
	for k, vs := range resp.Header {
		for _, v := range vs {
			if strings.Contains(v, origin.TrailerMark) || k == origin.TrailerField {
				ch.Violate("trailer-merged", "%s: header %s: %.80q came as a trailer (%s)", q, k, v, cs)
			}
		}
	}
	// A Trailer field net/http left in the header (an answer with a
	// Content-Length, such as a stored one) announces names as well.
	for _, line := range resp.Header.Values("Trailer") {
		for n := range strings.SplitSeq(line, ",") {
			if n = http.CanonicalHeaderKey(strings.TrimSpace(n)); slices.Contains(origin.ForbiddenTrailers, n) || n == origin.HopTrailer {
				ch.Violate("trailer-filter", "%s: Trailer field announces %s (%s)", q, n, cs)
			}
		}
		if shared(cs) {
			ch.mu.Lock()
			ch.checked["trailer-announced-shared"]++
			ch.mu.Unlock()
		}
	}
	sent := resp.Header.Get(origin.TrailerCall) != ""
	var got []string
	for k := range resp.Trailer {
		if k == origin.HopTrailer {
			ch.Violate("trailer-hop", "%s: trailer %s, named in the upstream's Connection, relayed: %q (%s)", q, k, resp.Trailer[k], cs)
		} else if slices.Contains(origin.ForbiddenTrailers, k) {
			ch.Violate("trailer-filter", "%s: trailer %s relayed (announced or sent: %q) (%s)", q, k, resp.Trailer[k], cs)
		}
		if k != origin.TrailerField {
			for _, v := range resp.Trailer[k] {
				if strings.Contains(v, origin.TrailerMark) {
					ch.Violate("trailer-filter", "%s: trailer %s: %q relayed (%s)", q, k, v, cs)
				}
			}
		}
		got = append(got, k)
	}
	tv := resp.Trailer.Values(origin.TrailerField)
	fwd := cacheFwd(cs)
	ch.mu.Lock()
	if sent {
		ch.checked["trailer-sent-"+fwd]++
	}
	if len(tv) > 0 {
		ch.checked["trailer-got-"+fwd]++
		if hv, _ := url.ParseQuery(tv[0]); hv.Get("hop") == "1" {
			ch.checked["trailer-hop-"+fwd]++
		}
	}
	ch.mu.Unlock()
	if len(got) == 0 {
		return
	}
	if shared(cs) {
		ch.Violate("trailer-shared", "%s: trailers %v on an answer served from a store or shared (%s)", q, got, cs)
	}
	if len(tv) == 0 {
		return
	}
	if len(tv) > 1 {
		ch.Violate("trailer-own", "%s: %d %s trailers: %q (%s)", q, len(tv), origin.TrailerField, tv, cs)
	}
	v, err := url.ParseQuery(tv[0])
	if err != nil {
		ch.Violate("trailer-own", "%s: %s %q: %v", q, origin.TrailerField, tv[0], err)
		return
	}
	if c := resp.Header.Get(origin.TrailerCall); v.Get("call") != c {
		ch.Violate("trailer-own", "%s: trailer of call %s on the answer of call %q (%s)", q, v.Get("call"), c, cs)
	}
	for _, d := range origin.TrailerDims {
		if got, want := v.Get(d), origin.TrailerValue(d, q.Sent[d]); got != "" && got != want {
			ch.Violate("trailer-identity", "%s: trailer for %s=%.40q, this request sent %.40q (%s)", q, d, got, want, cs)
		}
	}
	if rid := v.Get("rid"); strings.HasPrefix(rid, "rid-") && rid != q.Rid {
		ch.Violate("trailer-own", "%s: trailer of X-Request-Id %q (%s)", q, rid, cs)
	}
	if res := v.Get("res"); res != "" && res != q.Res {
		ch.Violate("trailer-own", "%s: trailer of the answer for %s, want %s (%s)", q, res, q.Res, cs)
	}
	if ids := v.Get("ids"); ids != "" {
		own := q.Ids
		if q.Kind != "list" {
			own = []string{strings.TrimPrefix(q.Res, "u/")}
		}
		for id := range strings.SplitSeq(ids, ",") {
			if !slices.Contains(own, id) {
				ch.Violate("trailer-own", "%s: trailer of the bulk call for %s (%s)", q, ids, cs)
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
