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

// The header section's bound.
//
// net/http reads MaxHeaderBytes plus 4096 bytes (its bufio slop) of a
// header section before it refuses it, so server.max_header_bytes 64 KiB
// let sections of up to 68 KiB through. Under Wire, net/http is given
// 4096 bytes less (at least 1), which makes its bound exact for a
// request read from an empty buffer; what it let through past the bound
// (a request of which it had read some bytes ahead, as the previous one
// ended, and any section under a bound of 4 KiB or less, its least being
// 4097 bytes) the handler refuses, 431 and closed, by what the section
// took on the wire: as the connection measured it (scanner: exact for a
// request sent after its previous answer, of which net/http read up to
// 4 KiB while it waited, unbounded, for the request to begin), and no
// less than the least its parsed fields take (headerBytes: for requests
// the measure misses, pipelined ones). Either way counted as
// ReasonHeaderTooLarge.

// Wire makes s count, on connections from Listener, the requests net/http
// answers itself (above), makes each connection reachable from its
// requests (ConnContext), and sends a client that left before its answer
// nothing more (gone.go), and lets a handler tell a body that ran out of
// time (bodytimeout.go); it answers 431 to a header section over
// s.MaxHeaderBytes (above; 0: net/http's default, with its slop). Its
// connections drop the empty lines (and stray CRs) before a request
// line, up to the connection's hijack (fold.go). It wraps s.Handler and sets
// s.ConnContext and s.ConnState, which must not be set otherwise, lowers
// s.MaxHeaderBytes and sets s.DisableGeneralOptionsHandler.
func Wire(s *http.Server) *http.Server {
	next := s.Handler
	if next == nil {
		next = http.DefaultServeMux
	}
	bound := s.MaxHeaderBytes
	if bound > 0 {
		s.MaxHeaderBytes = max(bound-4096, 1)
	}
	s.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := FromContext(r.Context())
		if c != nil {
			c.reqs++ // the request's number on c, as fold.go numbers sections
		}
		if bound > 0 && max(headerBytes(r), c.sectionBytes()) > bound {
			tooLarge(w, c)
			return
		}
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
	// Every request reaches the handler, so Wire numbers them all as
	// the fold scan numbers header sections (fold.go): net/http's own
	// answer to OPTIONS * skipped the handler, and the request after it
	// on the connection was taken for the one before (its fold went
	// unseen). Guard answers OPTIONS * as net/http did.
	s.DisableGeneralOptionsHandler = true
	return s
}

// tooLarge answers 431 and closes the connection (RFC 6585 §5), counted
// on c (nil: not through Listener) as net/http's own 431 is.
func tooLarge(w http.ResponseWriter, c *Conn) {
	if c != nil {
		c.phase.Store(phaseAnswering)
		if c.count != nil {
			c.count.EdgeRefused(ReasonHeaderTooLarge)
		}
	}
	h := w.Header()
	h.Set("Connection", "close")
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusRequestHeaderFieldsTooLarge)
	_, _ = w.Write([]byte("request header fields too large\n"))
}

// sectionBytes is c's measure of the header section being answered; 0
// when c is nil or saw none.
func (c *Conn) sectionBytes() int {
	if c == nil {
		return 0
	}
	return int(c.section.Load())
}

// headerBytes is the least r's header section took on the wire, as
// net/http parsed it: the request line, each field line as "name:value"
// (no blanks around the value, which net/http dropped) and the empty
// line, each ended by a bare LF. A section it finds over the bound was
// over it; one over it by less than its CRs and blanks is let through,
// never one under it refused.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 1 + 1
	if r.Host != "" {
		n += len("Host:") + len(r.Host) + 1
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + 1 + len(v) + 1
		}
	}
	return n
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
		if st == http.StateNew {
			// Before the connection's first read: Serve calls this
			// before it starts the connection's goroutine.
			c.folds.drop = true
		}
		c.phase.Store(phaseReading)
		c.scan.mark() // no read runs meanwhile: net/http reads once idle
		c.section.Store(0)
		if st == http.StateIdle && c.slot != nil && c.begun.Load() <= c.reqs {
			c.slot.Idle() // answered: closed first to make room (limit.go)
		}
	case http.StateActive:
		if c.slot != nil {
			c.slot.Busy() // Read did, unless the bytes came before the mark
		}
	case http.StateHijacked:
		// The connection leaves HTTP (an upgrade's tunnel): its bytes
		// are no requests, and no empty line of theirs is dropped.
		c.left.Store(true)
		if c.slot != nil {
			c.slot.Busy() // its slot is the tunnel's until it closes
		}
	}
}

// refusedByNetHTTP counts p as net/http's own answer if it is one: a
// write while no handler's answer is in progress (see above). Counted once:
// net/http closes the connection after it. It reports whether p is
// one, after which the connection lingers (linger.go).
func (c *Conn) refusedByNetHTTP(p []byte) bool {
	if !c.phase.CompareAndSwap(phaseReading, phaseAnswering) {
		return false
	}
	if c.count != nil {
		reason := ReasonMalformed
		if len(p) >= 12 && string(p[:9]) == "HTTP/1.1 " && string(p[9:12]) == "431" {
			reason = ReasonHeaderTooLarge
		}
		c.count.EdgeRefused(reason)
	}
	return true
}
