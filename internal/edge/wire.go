package edge

import (
	"io"
	"net"
	"net/http"
)

// What net/http answers itself.
//
// net/http answers some requests before any handler runs: a request line,
// header or Host it cannot parse (400), an HTTP version it does not speak
// (505), a transfer coding it does not know (501), an Expect it cannot
// meet (417), a header block over MaxHeaderBytes (431). No handler sees
// them, so only the connection can count them: a write on it while no
// handler's answer is in progress is net/http's own. Wire marks where
// handlers' answers run: from the handler's start to the connection
// going idle (http.StateIdle, after net/http has flushed the answer and
// discarded what was left of the request body; a connection that closes
// instead takes no further request). A write outside that window is
// counted once, under its status line's code.

// Connection phases, Conn.phase.
const (
	phaseUntracked int32 = iota // not served through Wire: nothing counted
	phaseReading                // between answers: a write is net/http's
	phaseAnswering              // a handler runs, or its answer is finishing
)

// Wire makes s count, on connections from Listener, the requests net/http
// answers itself (above), makes each connection reachable from its
// requests (ConnContext), and sends a client that left before its answer
// nothing more (gone.go), and lets a handler tell a body that ran out of
// time (bodytimeout.go). It wraps s.Handler and sets s.ConnContext and
// s.ConnState, which must not be set otherwise.
func Wire(s *http.Server) *http.Server {
	next := s.Handler
	if next == nil {
		next = http.DefaultServeMux
	}
	s.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := FromContext(r.Context())
		if c != nil {
			c.phase.Store(phaseAnswering)
			// The request's body, watched for its read deadline
			// (bodytimeout.go); requests on a connection come one at a
			// time, each handler on the connection's goroutine.
			c.body = nil
			if r.Body != nil && r.Body != http.NoBody {
				c.body = &timedBody{ReadCloser: r.Body}
				r = withBody(r, c.body)
			}
		}
		next.ServeHTTP(w, r)
		if c != nil && r.Context().Err() != nil && c.gone.Load() {
			// The client left (gone.go): send nothing more.
			panic(http.ErrAbortHandler)
		}
	})
	s.ConnContext = ConnContext
	s.ConnState = connState
	return s
}

// withBody returns a shallow copy of r reading body, for the handlers
// below Wire. r itself is the request net/http keeps for the connection,
// and its Body must stay net/http's own: when the answer's header is
// written, net/http looks at that Body's type to decide what to do with
// a body the handler left unread. Its own reader behind Expect:
// 100-continue, unread to its end, closes the connection after the
// answer (the client, told no 100, may never send it; RFC 9110 §10.1.1);
// any other type it drains first, from beneath the reader that sends the
// 100, so it waited for a body the client held back for a 100 that never
// came (the Go client sends it after its Transport's
// ExpectContinueTimeout), and only then answered.
func withBody(r *http.Request, body io.ReadCloser) *http.Request {
	r = r.WithContext(r.Context())
	r.Body = body
	return r
}

// connState is http.Server's ConnState under Wire.
func connState(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*Conn)
	if !ok {
		return
	}
	switch st {
	case http.StateNew, http.StateIdle:
		c.phase.Store(phaseReading)
	}
}

// refusedByNetHTTP counts p as net/http's own answer if it is one: a
// write while no handler's answer is in progress (see above). Counted once:
// net/http closes the connection after it.
func (c *Conn) refusedByNetHTTP(p []byte) {
	if c.count == nil || !c.phase.CompareAndSwap(phaseReading, phaseAnswering) {
		return
	}
	reason := ReasonMalformed
	if len(p) >= 12 && string(p[:9]) == "HTTP/1.1 " && string(p[9:12]) == "431" {
		reason = ReasonHeaderTooLarge
	}
	c.count.EdgeRefused(reason)
}
