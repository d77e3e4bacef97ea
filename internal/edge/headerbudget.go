package edge

import (
	"errors"
	"net"
	"time"

	"github.com/sidecache/sidecache/internal/headerbudget"
)

// The bound on what header sections still being read hold
// (server.max_pending_header_bytes; internal/headerbudget).
//
// net/http keeps what it has read of a header section until the section
// ends: its lines, and the fields made of them. The connection sees
// those bytes first (Read, measured by the scan from the section's first
// byte: scanner.since until scanner.end). A section that ends in the read
// that began it, every ordinary request, is never counted: the only cost
// is a test of the scan's state. One that does not is counted in the
// process's Budget after each read that leaves it unfinished, and taken
// out at the read that ends it, or at a failed read. Both listeners
// share the budget: the memory is the process's. When the count goes
// over it, the connections holding the most are cut (Cut): the blocked
// read is woken, and the reader, whose next Grow or End reports the cut,
// answers 431 (RFC 6585 §5) and closes, counted as ReasonHeaderBudget,
// with a lingering close (linger.go) so the client reads the 431 rather
// than a reset. A kubelet's /readyz, whose section arrives whole, is
// never held, so a flood of stalled sections on the proxy listener never
// refuses it.

// errHeaderBudget is what net/http reads from a connection refused at
// the header budget: a read error of the kind it ends a connection on
// without an answer of its own (the 431 is written already).
var errHeaderBudget = errors.New("edge: header section cut at server.max_pending_header_bytes")

// header431 is the answer to a connection cut at the header budget.
const header431 = "HTTP/1.1 431 Request Header Fields Too Large\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"X-Content-Type-Options: nosniff\r\n" +
	"Connection: close\r\n" +
	"Content-Length: 32\r\n\r\n" +
	"request header fields too large\n"

// WithHeaderBudget makes the connections ln accepts count their
// unfinished header sections in heads (nil: none). ln must come from
// Listener or CappedListener; any other is returned as it is.
func WithHeaderBudget(ln net.Listener, heads *headerbudget.Budget) net.Listener {
	if l, ok := ln.(*listener); ok {
		l.heads = heads
	}
	return ln
}

// countHeaders counts, after a read of n bytes that returned err, the
// header section c is reading, and reports the error net/http is to
// read instead when c was cut: nil otherwise.
func (c *Conn) countHeaders(n int, err error) error {
	var cut bool
	switch {
	case n > 0 && err == nil && c.scan.end == 0 && c.scan.since > 0:
		cut = c.heads.Grow(&c.hhold, (*headerCutter)(c), c.scan.since)
		c.hcounted.Store(!cut)
	case c.hcounted.Swap(false):
		cut = c.heads.End(&c.hhold)
	}
	if !cut {
		return nil
	}
	return c.refuseHeaders()
}

// cutHeaders is headerbudget.Reader's Cut: it wakes c's read, whose reader then
// finds c cut (countHeaders). Called from another connection's read.
func (c *Conn) cutHeaders() {
	c.hmu.Lock()
	if !c.hrefused {
		_ = c.Conn.SetReadDeadline(time.Unix(1, 0))
	}
	c.hmu.Unlock()
}

// refuseHeaders answers 431, counted once, and starts the lingering
// close: a poke at the read deadline (cutHeaders) after this would end
// the drain early.
func (c *Conn) refuseHeaders() error {
	c.hmu.Lock()
	c.hrefused = true
	c.hmu.Unlock()
	c.phase.Store(phaseAnswering) // no write after this is net/http's own refusal
	if c.count != nil {
		c.count.EdgeRefused(ReasonHeaderBudget)
	}
	_, _ = c.write([]byte(header431))
	c.lingerAfter()
	return &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: errHeaderBudget}
}

// endHeaders takes c's section out of the count as its socket closes:
// net/http refuses a section over MaxHeaderBytes itself, once it has read
// that much, and reads no more of the connection, so no failed read
// ends the count.
func (c *Conn) endHeaders() {
	if c.heads != nil && c.hcounted.Swap(false) {
		c.heads.End(&c.hhold)
	}
}

// headerCutter is c as a headerbudget.Reader (Conn's Cut is the send
// budget's).
type headerCutter Conn

func (h *headerCutter) Cut() { (*Conn)(h).cutHeaders() }
