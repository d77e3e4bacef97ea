package rawio

import "io"

// Ask is a request and the first bytes of its reply in one poller call.
//
// A request-reply client (the L2 hit's MGET, internal/cache/l2/mget; the
// upstream's bulk call, fill and pass-through, internal/lean) writes its
// command and then reads: net.Conn's read, and Read, try the
// system call first, which finds nothing (EAGAIN) unless the peer
// answered before the write returned, and only then wait in the poller —
// a read(2) that returns no byte (about 1 µs of a one-core sidecar's
// ~50 µs L2 hit) on every call over a network, on 30–75 % of them to a
// Redis on the same host (the rest then need not wait at all, which Ask
// always does). It must try first: the poller's read
// preparation (internal/poll, prepareRead) forgets any readiness seen
// before it, so a wait that skipped the try could miss bytes that came
// meanwhile and sleep until the deadline. Ask writes the request inside
// the poller's read call, after that preparation: whatever arrives after
// the write marks the descriptor readable for the wait that follows, so
// the first read is made once the reply is there.

// Ask writes req, then waits for the reply and reads what of it has come
// into p, as Write then Read would, with one read system call fewer when
// the reply is not there the instant the request is written. wrote is how
// much of req was written; when it is short, err is the write's failure
// (net.Conn's, Op "write", as Write returns it) and nothing was read.
// Otherwise n and err are Read's. The request is written without the
// write deadline's wait when the socket takes it at once, as WriteNow;
// what it does not take is written by Write. It must not run beside
// another Write or Read of c's (the request-reply client holds the
// connection for the call).
func (c *Conn) Ask(req, p []byte) (wrote, n int, err error) {
	if c.rc == nil || len(req) == 0 || len(p) == 0 {
		return c.askApart(req, p)
	}
	if len(p) > maxRW {
		p = p[:maxRW]
	}
	c.wmu.Lock()
	c.rmu.Lock()
	c.wp, c.wn, c.werr, c.wwait = req, 0, nil, false
	c.rp, c.rn, c.rerr, c.asking = p, 0, nil, true
	perr := c.rc.Read(c.afn)
	wrote, werr, asked := c.wn, c.werr, !c.asking
	n, rerr := c.rn, c.rerr
	c.wp, c.werr, c.rp, c.rerr, c.asking = nil, nil, nil, nil, false
	c.rmu.Unlock()
	c.wmu.Unlock()
	switch {
	case !asked: // the poller failed the call before it wrote (deadline passed, closed)
		return 0, 0, c.opError("write", perr)
	case werr != nil:
		return wrote, 0, c.opError("write", werr)
	case wrote < len(req): // the socket's buffer was full: the rest waits, then the reply
		m, err := c.Write(req[wrote:])
		if err != nil {
			return wrote + m, 0, err
		}
		n, err := c.Read(p)
		return len(req), n, err
	case perr != nil:
		return wrote, 0, c.opError("read", perr)
	case rerr != nil:
		return wrote, 0, c.opError("read", rerr)
	case n == 0:
		return wrote, 0, io.EOF
	}
	return wrote, n, nil
}

// askApart is Ask as Write then Read, where the calls are not raw.
func (c *Conn) askApart(req, p []byte) (wrote, n int, err error) {
	wrote, err = c.Write(req)
	if err != nil || wrote < len(req) {
		return wrote, 0, err
	}
	n, err = c.Read(p)
	return wrote, n, err
}

// askFD is Ask's callback: the first call writes the request (writeFD) and
// waits (false) when the socket took all of it; a later one is readFD.
func (c *Conn) askFD(fd uintptr) bool {
	if !c.asking {
		return c.readFD(fd)
	}
	c.asking = false
	c.writeFD(fd)
	return c.werr != nil || c.wn < len(c.wp)
}
