package edge

import (
	"io"
	"net/http"
)

// A request body the client got wrong.
//
// A body whose framing breaks as it is read (a chunk size past 2^63, a
// chunk line that is no hex, a chunk not ended by CRLF: RFC 9112 §7.1)
// fails the upstream request that was sending it. That failure is the
// client's, not the upstream's: it is answered 400 (RFC 9110 §15.5.1) and
// the connection closed, as NGINX answers a malformed chunked body, and
// counted under ReasonMalformed — never as an upstream error, which any
// client could otherwise raise at will, alerts and logs included (probe
// D6: a 502, a WARN "upstream failed" and upstream_requests_total
// {code="error"} per request). A client that left mid-body (its
// connection ended: gone.go) is not answered at all, as before.

// failed reports whether err, a body read's, is the body's own failure:
// neither its end nor the read deadline (bodytimeout.go).
func failed(err error) bool { return err != nil && err != io.EOF && !timeout(err) }

// BodyMalformed reports whether a read of r's body failed while its
// client was still there (r came through Wire; r may be a copy of the
// handler's, as BodyTimedOut). A handler whose work failed then answers
// with AnswerBody.
func BodyMalformed(r *http.Request) bool {
	c := FromContext(r.Context())
	return c != nil && c.body != nil && c.body.failed.Load() && !c.gone.Load()
}

// AnswerBody answers a request whose body failed, 408 when it ran out of
// time (AnswerBodyTimeout), 400 when it was malformed; either way the
// connection is closed after, since the rest of the body cannot be framed.
func AnswerBody(w http.ResponseWriter, r *http.Request) {
	if BodyTimedOut(r) {
		AnswerBodyTimeout(w, r)
		return
	}
	if c := FromContext(r.Context()); c != nil && c.count != nil {
		c.count.EdgeRefused(ReasonMalformed)
	}
	h := w.Header()
	h.Set("Connection", "close")
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write([]byte("malformed request body\n"))
}
