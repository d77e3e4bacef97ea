package edge

import (
	"io"
	"net/http"
	"sync/atomic"
)

// A request body that ran out of time.
//
// server.read_timeout bounds the time to receive a whole request, its body
// included: a body still arriving then fails its next read with a
// deadline's error, and net/http ends the request's context (gone.go).
// The client is still there, and must be told: not by silence, which
// net/http turns into an implicit empty 200 (a write that never arrived
// whole, told it succeeded), and not by the upstream's answer to a body it
// got cut short. It is answered 408 Request Timeout (RFC 9110 §15.5.9) and
// the connection closed, as NGINX answers a body past client_body_timeout;
// counted under ReasonReadTimeout.
//
// Wire wraps each request body, so that a handler whose upstream request
// failed can tell this case (BodyTimedOut) from a client that left, and
// answer it (AnswerBodyTimeout).

// timedBody is a request body that notes a read ended by a deadline.
type timedBody struct {
	io.ReadCloser
	timedOut atomic.Bool // read on the upstream request's writer, loaded by the handler
	failed   atomic.Bool // a read failed otherwise (badbody.go)
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && timeout(err) {
		b.timedOut.Store(true)
	} else if failed(err) {
		b.failed.Store(true)
	}
	return n, err
}

// BodyTimedOut reports whether a read of r's body ended at the server's
// read deadline (r came through Wire; r may be a copy of the request the
// handler was given, with its body wrapped again, as ReverseProxy hands
// its ErrorHandler: the connection's request is looked up, not r.Body). A
// handler whose work failed then answers with AnswerBodyTimeout, not as
// for a client that left.
func BodyTimedOut(r *http.Request) bool {
	c := FromContext(r.Context())
	return c != nil && c.body != nil && c.body.timedOut.Load()
}

// AnswerBodyTimeout answers a request whose body ran out of time (see
// BodyTimedOut) 408, closes its connection after (the rest of the body
// may still come, and would be read as a request), and counts it under
// ReasonReadTimeout.
func AnswerBodyTimeout(w http.ResponseWriter, r *http.Request) {
	if c := FromContext(r.Context()); c != nil && c.count != nil {
		c.count.EdgeRefused(ReasonReadTimeout)
	}
	h := w.Header()
	h.Set("Connection", "close")
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusRequestTimeout)
	_, _ = w.Write([]byte("request body timed out\n"))
}
