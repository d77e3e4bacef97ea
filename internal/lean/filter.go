package lean

import (
	"io"
	"net/http"
	"net/textproto"
	"strings"
)

// FilterTrailers applies trailers to the trailers httputil.ReverseProxy
// will relay from resp, so that its path drops the fields WriteResponse
// and WriteTrailers drop: the names announced now, and the fields that
// came, as soon as they are in resp.Trailer (see trailerFilter), before
// ReverseProxy copies them. An upgraded connection's body is left as it
// is: ReverseProxy needs it to be the connection.
func FilterTrailers(resp *http.Response, trailers func(http.Header)) {
	if resp.StatusCode == http.StatusSwitchingProtocols || resp.Body == nil || resp.Body == http.NoBody {
		return
	}
	trailers(resp.Trailer)
	if resp.ContentLength < 0 { // only a chunked answer has trailers
		resp.Body = newTrailerFilter(resp, trailers)
	}
}

// trailerFilter applies f to resp.Trailer whenever a read of the body
// finds it grown, and at the body's end. The transport fills
// resp.Trailer when the body on the wire ends, which is not always this
// body's end: http.Transport's gzip decoder (an answer to a request that
// sent no Accept-Encoding, which the transport asked in gzip itself)
// reads the small compressed body, and its trailers, ahead of the decoded
// bytes it returns. A field f drops must be gone by the time the read
// that brought it returns, or the large-body stream, which announces the
// trailers after the fill has read max_body_bytes of the decoded body,
// announces it. f decides by name, so a field it kept, which only gets
// its value, needs no second look; a new name always grows the map.
type trailerFilter struct {
	io.ReadCloser
	resp *http.Response
	f    func(http.Header)
	seen int // len(resp.Trailer) when f last ran
}

func newTrailerFilter(resp *http.Response, f func(http.Header)) *trailerFilter {
	return &trailerFilter{ReadCloser: resp.Body, resp: resp, f: f, seen: len(resp.Trailer)}
}

func (b *trailerFilter) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if t := b.resp.Trailer; len(t) != b.seen || err == io.EOF && len(t) > 0 {
		b.f(t)
		b.seen = len(b.resp.Trailer)
	}
	return n, err
}

// DropConnectionTrailers removes from resp's trailers, those announced now
// and those that come with the body (trailerFilter), the fields resp's Connection
// header names: hop-by-hop fields (RFC 9110 §7.6.1), which the caller
// drops from the header when it removes the hop-by-hop fields, must not
// reach the client as trailers either. It must be called before that
// removal (which deletes Connection itself): RoundTrip does, and HopTrailers
// does for an http.RoundTripper, before httputil.ReverseProxy strips the
// header. An answer whose Connection names nothing is left untouched, so
// the common path costs no wrapper.
func DropConnectionTrailers(resp *http.Response) {
	conn := resp.Header["Connection"]
	if !namesField(conn) {
		return
	}
	dropConnectionNamed(resp, conn)
}

// dropConnectionNamed is DropConnectionTrailers past its check, apart so
// that the closure, which escapes, is only allocated when it is needed.
func dropConnectionNamed(resp *http.Response, conn []string) {
	drop := func(t http.Header) {
		for k := range t {
			if namedIn(conn, k) {
				delete(t, k)
			}
		}
	}
	drop(resp.Trailer)
	if resp.StatusCode != http.StatusSwitchingProtocols && resp.Body != nil && resp.Body != http.NoBody && resp.ContentLength < 0 {
		resp.Body = newTrailerFilter(resp, drop)
	}
}

// namesField reports whether a Connection field names a field other than
// its own options close and keep-alive (an upstream may send
// "Connection: keep-alive" on every answer): only such a name can be a
// trailer to drop.
func namesField(conn []string) bool {
	for _, f := range conn {
		for n := range strings.SplitSeq(f, ",") {
			n = textproto.TrimString(n)
			if n != "" && !strings.EqualFold(n, "close") && !strings.EqualFold(n, "keep-alive") {
				return true
			}
		}
	}
	return false
}

// HopTrailers returns rt with DropConnectionTrailers applied to each
// answer, as it comes, before anything strips its Connection header.
// CloseIdleConnections reaches rt's, if it has one.
func HopTrailers(rt http.RoundTripper) http.RoundTripper { return hopTrailers{rt} }

type hopTrailers struct{ rt http.RoundTripper }

func (h hopTrailers) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := h.rt.RoundTrip(r)
	if err == nil {
		DropConnectionTrailers(resp)
	}
	return resp, err
}

// CloseIdleConnections closes rt's idle connections.
func (h hopTrailers) CloseIdleConnections() {
	if c, ok := h.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
