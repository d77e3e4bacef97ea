package upframe

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
)

var (
	// ErrAmbiguous fails an answer whose header carried both
	// Content-Length and Transfer-Encoding. RFC 9112 §6.3 says such a
	// message "ought to be handled as an error": it is how a response is
	// split or smuggled, and what a next hop that frames by Content-Length
	// reads differs from what the chunked framing does. It is answered
	// 502, as NGINX (upstream sent "Content-Length" and
	// "Transfer-Encoding" headers at the same time) and Varnish do, not
	// relayed re-framed: nothing of it is stored or relayed, and its
	// connection is closed, never reused, since where its body ends is
	// the question.
	ErrAmbiguous = errors.New("upstream answer has both Content-Length and Transfer-Encoding")
	// ErrUnconditional304 fails a 304 Not Modified to a request that
	// carried no condition that could make one (If-None-Match,
	// If-Modified-Since: RFC 9110 §13.2.2, §15.4.5). It answers a
	// conditional GET or HEAD only; a client that sent no condition has
	// no copy to reuse, and on the cached path the sidecar sent none
	// unless it revalidates a copy of its own. Answered 502, as Varnish
	// fails it, not relayed as a bodiless answer the client would take
	// as the resource.
	ErrUnconditional304 = errors.New("upstream answered 304 Not Modified to an unconditional request")
)

// Conditional reports whether a request of header h can be answered 304
// (RFC 9110 §13.2.2: If-None-Match or If-Modified-Since).
func Conditional(h http.Header) bool {
	_, inm := h["If-None-Match"]
	_, ims := h["If-Modified-Since"]
	return inm || ims
}

// Answer is the check of one answer's status against its request: a
// 304 is an answer to a conditional request only.
func Answer(req *http.Request, resp *http.Response) error {
	if resp.StatusCode == http.StatusNotModified && !Conditional(req.Header) {
		return ErrUnconditional304
	}
	return nil
}

// Check returns rt with both checks applied to every answer: an answer
// that fails one has its body closed and the error returned, and an
// ambiguous one's connection (a Conn, which rt's dialer made with Wrap)
// is closed. Over TLS the connection the answer came on is the
// tls.Conn, above the scanned one, so only the status check applies.
func Check(rt http.RoundTripper) http.RoundTripper { return &check{rt: rt} }

type check struct{ rt http.RoundTripper }

func (c *check) RoundTrip(r *http.Request) (*http.Response, error) {
	var last atomic.Pointer[Conn]
	out := r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if uc, ok := info.Conn.(*Conn); ok {
			last.Store(uc)
		} else {
			last.Store(nil)
		}
	}}))
	resp, err := c.rt.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	if uc := last.Load(); uc != nil && uc.Ambiguous() {
		_ = uc.Close() // before the body's close could put it back
		resp.Body.Close()
		return nil, ErrAmbiguous
	}
	if err := Answer(r, resp); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

// CloseIdleConnections closes rt's idle connections.
func (c *check) CloseIdleConnections() {
	if ci, ok := c.rt.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

var _ net.Conn = (*Conn)(nil)
