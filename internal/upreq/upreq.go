// Package upreq builds the upstream GET of the cached path (a per-key fill
// or a bulk call) from a client's request: what reaches the upstream is
// what the key holds (forward.Rules: the keyed and learned headers), plus
// what the sidecar writes itself — its own request id, Via and trace
// context, X-Forwarded-* from the connection — never the client's copy of
// those.
//
// It exists apart from the proxy because the answer to this request is
// stored for everyone: every header it carries must be one the key holds
// or the sidecar wrote, and that rule (RFC 9110 §7.6.1's Connection-named
// fields, §7.6.3's Via, the canonical host of key.host) reads and tests
// alone, on a request, without a proxy. It builds with
// httputil.ProxyRequest, as pass-through does.
package upreq

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strings"

	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/clientaddr"
	"github.com/sidecache/sidecache/internal/forward"
	"github.com/sidecache/sidecache/internal/spans"
)

// Target is what a route's upstream GET is built with.
type Target struct {
	Up    *url.URL          // the upstream: scheme, host and base path
	Rules *forward.Rules    // which of the client's headers go
	Key   *cachekey.Options // the route's key, for its host rule; nil: none
	Via   []string          // the sidecar's Via field (read-only); nil: none
	Trace bool              // the current span goes as traceparent
}

// Get builds the upstream GET for in at path and rawQuery (the query the
// key holds), with ctx. SetURL, then SetXForwarded from the client's
// address, never from what the client claimed, and X-Real-Ip with it
// (clientaddr).
func (t *Target) Get(ctx context.Context, in *http.Request, path, rawQuery string) *http.Request {
	u := &url.URL{Path: path, RawQuery: rawQuery}
	if path == in.URL.Path && in.URL.RawPath != "" {
		u.RawPath = in.URL.RawPath // a %2F stays one, as on pass-through
	}
	out := (&http.Request{
		Method: http.MethodGet, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: make(http.Header, len(in.Header)+3), Host: in.Host,
	}).WithContext(ctx)
	copyHeaders(t.Rules, out.Header, in.Header)
	// The sidecar's own request id and trace context, never the client's
	// (forward.Own): the answer is stored for everyone, and one that
	// echoes a client's id would serve that client's text to all. The
	// access log keeps both for correlation.
	out.Header["X-Request-Id"] = []string{rand.Text()}
	if t.Via != nil {
		out.Header["Via"] = t.Via[:1:1] // ours alone: the client's is not forwarded here (forward.Own)
	}
	if t.Trace {
		spans.Inject(ctx, out.Header)
	}
	pr := httputil.ProxyRequest{In: in, Out: out}
	pr.SetURL(t.Up)
	pr.SetXForwarded()
	clientaddr.Set(out.Header, in.RemoteAddr) // X-Real-Ip from the same peer
	// What reaches the upstream is what the key holds: with key.host set,
	// the upstream is told the canonical host (or none), never the one
	// this client spelled, which the shared entry does not record.
	if k := t.Key; k != nil && (k.NoHost || k.Host != "") {
		if h := k.KeyHost(in.Host); h != "" {
			out.Header.Set("X-Forwarded-Host", h)
		} else {
			out.Header.Del("X-Forwarded-Host")
		}
	}
	if _, ok := out.Header["User-Agent"]; !ok {
		// As ReverseProxy: do not add Go's. Nothing goes on the wire, and
		// what judges a fetch by what it sent reads it so
		// (forward.SentValues).
		out.Header.Set("User-Agent", "")
	}
	return out
}

// copyHeaders fills dst with what rules forward of src. Hop-by-hop and
// conditional fields never go (the cache answers conditionals itself and
// wants a full response to store), nor do a client's Forwarded,
// X-Forwarded-*, Via, request id and trace context (forward.Own: the
// sidecar writes its own, never trusting the client's). A field the
// client's Connection names is hop-by-hop too (RFC 9110 §7.6.1): it is
// taken from what was copied by src's Connection, as Copy never copies
// Connection itself (nor any other hop-by-hop field: the rules' Never),
// so dst's own, which RemoveHopHeaders(dst) read, named nothing.
func copyHeaders(rules *forward.Rules, dst, src http.Header) {
	rules.Copy(dst, src)
	for _, v := range src["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				dst.Del(name)
			}
		}
	}
}
