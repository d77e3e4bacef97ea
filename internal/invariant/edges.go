package invariant

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/sidecache/sidecache/internal/invariant/origin"
)

// The HTTP edge inputs of issue 21 that can shape an answer on the cached
// path, each drawn at a low rate: Range (bypassed, and never stored as the
// whole), absolute-form targets (RFC 9112 §3.2.2: the authority replaces
// Host), writes with a body sent chunked with trailers or behind Expect:
// 100-continue, and duplicate field lines of the headers an answer varies
// on. Percent-encoded path spellings and odd Accept-Encoding lists are
// drawn with the paths and headers (request.go).

// drawEdges draws the request-line and framing edges of q.
func (r *run) drawEdges(q *request) {
	m := r.cfg.Mix
	if q.Method == http.MethodGet && m.Has("range") && r.chance(4) {
		q.Hdr.Set("Range", pick(r, "bytes=0-9", "bytes=-5", "bytes=0-0,5-9", "bytes=10-"))
	}
	if m.Has("absolute-form") && r.chance(5) {
		q.Absolute = true
		if q.Route == "h" && q.Host == "" {
			q.Host = pick(r, r.cfg.Host, "svc", "SVC.Invariant")
		}
		if q.Host == "" {
			q.Host = r.cfg.Host
		}
	}
	if q.Method == http.MethodPatch {
		if m.Has("chunked-write") && r.chance(15) {
			q.Body, q.Chunked = `{"bump":1}`, true
		}
		if m.Has("expect") && r.chance(15) {
			q.Body, q.Expect = `{"bump":1}`, true
		}
	}
}

// drawDuplicates sends a header the origin may vary on as two field
// lines (RFC 9110 §5.3: one list, joined with commas): another value
// after the client's own, or an empty line before it. The origin joins
// every non-empty line (dimValue), so what the client sent is that join;
// a sidecar that keyed on the first line only, or forwarded only it,
// would serve one list's answer to another.
func (r *run) drawDuplicates(q *request) {
	h := q.Hdr
	switch pick(r, "lang", "tenant", "encoding") {
	case "lang":
		if lang := h.Get("Accept-Language"); lang != "" && len(lang) < 100 {
			h["Accept-Language"] = []string{lang, pick(r, "en", "fr", "de")}
			if r.chance(30) {
				h["Accept-Language"] = []string{"", lang}
			}
			q.Sent["lang"] = origin.JoinLines(h["Accept-Language"])
		}
	case "tenant":
		if t := h.Get("X-Tenant"); t != "" {
			h["X-Tenant"] = []string{t, pick(r, "acme", "globex", "initech")}
			if r.chance(30) {
				h["X-Tenant"] = []string{"", t}
			}
			q.Sent["tenant"] = origin.JoinLines(h["X-Tenant"])
		}
	default:
		h["Accept-Encoding"] = pick2(r, []string{"identity", "gzip"}, []string{"", "gzip"}, []string{"gzip;q=0", "identity"})
	}
}

func pick2(r *run, s ...[]string) []string { return s[r.rng.IntN(len(s))] }

// proxyKey carries the replica an absolute-form request goes through.
type proxyKey struct{}

// viaProxy is the proxied client's Proxy: the replica the request's
// context names, so the request line is absolute-form.
func viaProxy(req *http.Request) (*url.URL, error) {
	u, _ := req.Context().Value(proxyKey{}).(*url.URL)
	return u, nil
}

// newRequest builds q's request to replica base: origin-form to the
// replica, or absolute-form through it; a write's body, chunked with
// trailers or behind Expect: 100-continue.
func (r *run) newRequest(ctx context.Context, q *request, base string) (*http.Request, error) {
	target := base + q.Path
	if q.Absolute {
		pu, err := url.Parse(base)
		if err != nil {
			return nil, err
		}
		ctx = context.WithValue(ctx, proxyKey{}, pu)
		host := r.cfg.Host
		if q.Host != "" {
			host = q.Host
		}
		target = "http://" + host + q.Path
	}
	var body io.Reader
	if q.Body != "" {
		body = strings.NewReader(q.Body)
	}
	req, err := http.NewRequestWithContext(ctx, q.Method, target, body)
	if err != nil {
		return nil, err
	}
	req.URL.RawQuery = q.Query
	if !q.Absolute {
		req.Host = r.cfg.Host
		if q.Host != "" {
			req.Host = q.Host
		}
	}
	if q.Body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if q.Chunked {
		req.ContentLength = -1
		req.Body = io.NopCloser(strings.NewReader(q.Body)) // unknown length: chunked
		req.GetBody = nil
		// A trailer naming a tag header and one naming a field that
		// may not be a trailer (RFC 9110 §6.5.1): both must be dropped.
		req.Trailer = http.Header{"Surrogate-Key": {"r:1 r:2 r:3 r:4"}, "Cache-Control": {"no-store"}, "X-Sum": {"1"}}
	}
	if q.Expect {
		req.Header.Set("Expect", "100-continue")
	}
	return req, nil
}

// countEdges counts the answered requests that carried an edge input, so
// a run's report shows these inputs reached the replicas.
func (r *run) countEdges(q *request, resp *http.Response) {
	var k string
	switch {
	case q.Absolute:
		k = "absolute-form"
	case q.Chunked:
		k = "chunked-write"
	case q.Expect:
		k = "expect"
	case q.Hdr.Get("Range") != "":
		k = "range"
	default:
		return
	}
	r.mu.Lock()
	r.rep.Checked[k+"-"+resp.Status[:3]]++
	r.mu.Unlock()
}
