package lean

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sidecache/sidecache/internal/rawio"
	"github.com/sidecache/sidecache/internal/upframe"
)

// Conn is one upstream connection, lent by Client.RoundTrip until Put or
// Close.
type Conn struct {
	c  net.Conn
	rw *rawio.Conn // c's reads and writes, raw (internal/rawio)
	// scan watches the answer's header sections for Content-Length and
	// Transfer-Encoding together (internal/upframe), which
	// http.ReadResponse reads by the chunked framing with no word.
	scan upframe.Scanner
	// interim: the answer being read began with a 1xx. The upstream got
	// the request, so a failure after it is not the closed keep-alive
	// connection a resend is for (RFC 9112 §9.3.1), and a resend would
	// relay the 1xx again (RFC 9110 §15.2): no resend then.
	interim bool
	lr      limitReader // under br, over rw: bounds the header sections read
	br      *bufio.Reader
	bw      *bufio.Writer // over ask: a request's bytes wait for its answer's read
	ask     asker
	used    time.Time // last returned to the pool
	keep    bool      // the last answer did not ask to close
	// deadline: the read deadline still set (the answer's body was read
	// whole with the header); zero: none. Cleared when the connection is
	// reused after it passed, so an idle connection lives its idle time.
	deadline time.Time
	// stop ends the watch on the client's request (RoundTrip's ctx): until
	// then, the client leaving breaks the body's read, so the upstream sees
	// the request end on every path, not only while the header is awaited.
	stop func() bool
	// expire ends the wait for the answer at once (the client left):
	// made once per connection, so a request's watch allocates no closure.
	expire func()
	// gone: expire has run. A body read that moves the deadline on
	// (armBody) looks at it after, so the client leaving is never undone
	// by a later deadline.
	gone atomic.Bool

	// unsolicited's peek where rw's is not raw, made on first reuse.
	rc   syscall.RawConn
	peek func(fd uintptr) bool
	bad  bool
}

// Close closes the connection: after a failure, or a body not read to its
// end. Closing it, never the body, which would drain the rest of a stream
// that may not end.
func (c *Conn) Close() {
	c.unwatch()
	c.c.Close()
}

// Buffered is the count of the answer's bytes read from the upstream and
// not yet handed out (Pending): 0 when its body's next read waits on the
// upstream.
func (c *Conn) Buffered() int { return c.br.Buffered() }

// unwatch stops the watch on the client's request; false when it has
// fired (or is firing): the read deadline may be in the past.
func (c *Conn) unwatch() bool {
	stop := c.stop
	c.stop = nil
	return stop == nil || stop()
}

// asker is the writer under a connection's bufio.Writer: it holds the
// request's bytes (bw's Flush) for the answer's first read, which writes
// them inside the poller's read call (rawio.Conn.Ask) and then waits for
// the answer. Written first and read after, the read finds nothing unless
// the upstream answered within the write's return (never, for a bulk
// call's 5 ms query): one read(2) returning EAGAIN per call, ~1 µs of
// CPU, on every bulk call, fill and pass-through (perf record of
// bench/miss-vs-hit.sh: recvfrom, write, read EAGAIN, read per bulk call).
// A failure to write is the read's failure (Op "write"): the same error
// the caller got from the flush, a call later.
type asker struct {
	rw  *rawio.Conn
	req []byte // held request bytes, a copy: bw reuses its buffer
}

// Write holds p for the next read. A request larger than bw's buffer
// comes in several Writes: those before the last are written at once.
func (a *asker) Write(p []byte) (int, error) {
	if len(a.req) > 0 {
		if _, err := a.rw.Write(a.req); err != nil {
			a.req = a.req[:0]
			return 0, err
		}
	}
	a.req = append(a.req[:0], p...)
	return len(p), nil
}

// read is the answer's first read when a request is held: Ask.
func (a *asker) read(p []byte) (int, error) {
	req := a.req
	a.req = a.req[:0]
	_, n, err := a.rw.Ask(req, p)
	return n, err
}

// limitReader is the connection as the answer's reader sees it: at most n
// bytes while header sections are read, as http.Transport bounds them
// (MaxResponseHeaderBytes), so an upstream's header line that never ends
// costs a bounded buffer and a 502, not all the memory it cares to send.
type limitReader struct {
	c   io.Reader // the connection's reads (rawio)
	ask *asker    // a request held for the answer's first read
	n   int64
	// idle bounds the wait for each of a body's bytes (armBody); 0 while
	// header sections are read (their own deadline bounds them all).
	idle  time.Duration
	armed time.Time // when the body's deadline was last moved
	conn  *Conn
}

// errHeaderTooLarge: the upstream's header sections went past the bound.
var errHeaderTooLarge = errors.New("upstream response headers exceed the limit")

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	if l.idle > 0 {
		// A clock read per body read; the deadline itself moves only
		// after an eighth of the bound, as a deadline set is a timer's
		// reset: a read that waits is still cut after idle, at most
		// idle + idle/8, without a byte (armBody).
		if now := time.Now(); now.Sub(l.armed) > l.idle/8 {
			l.conn.armBody(now, l.idle)
		}
	}
	var n int
	var err error
	if len(l.ask.req) > 0 {
		n, err = l.ask.read(p)
	} else {
		n, err = l.c.Read(p)
	}
	l.n -= int64(n)
	if n > 0 {
		l.conn.scan.Feed(p[:n])
	}
	return n, err
}

// expireNow is expire: the read deadline in the past, after gone is set
// (see armBody).
func (c *Conn) expireNow() {
	c.gone.Store(true)
	_ = c.c.SetReadDeadline(time.Unix(1, 0))
}

// armBody bounds the wait for each of an answer's body bytes, from now:
// the read deadline is now + idle + idle/8, moved on by the body's reads
// (limitReader.Read) whenever an eighth of idle has passed since it last
// moved, so any read that starts has at least idle to wait and at most
// idle + idle/8. This is NGINX's proxy_read_timeout and Varnish's
// between_bytes_timeout: a long download that keeps coming is not cut, an
// upstream that sends nothing more is (probe h3 #2: a body stalled halfway
// held the client's connection, the upstream's and the handler for as
// long as the client waited). Only reads wait under it: time spent
// writing to a slow client is the client's (server.write_timeout), and
// the next read moves the deadline on before it waits.
func (c *Conn) armBody(now time.Time, idle time.Duration) {
	c.lr.idle, c.lr.armed = idle, now
	c.deadline = now.Add(idle + idle/8)
	_ = c.c.SetReadDeadline(c.deadline)
	if c.gone.Load() {
		// The client left meanwhile: its deadline in the past stands.
		c.expire()
	}
}

// unsolicited reports bytes the upstream sent on the idle connection after
// the answer it was asked for, or a connection it closed: read as the next
// answer, they would hand one client's response to another, so such a
// connection is dropped before reuse, as net/http's transport drops one
// ("Unsolicited response received on idle HTTP channel"). One non-blocking
// peek (MSG_PEEK|MSG_DONTWAIT) per reuse, raw (internal/rawio) on Linux.
func (c *Conn) unsolicited() bool {
	if pending, ok := c.rw.Pending(); ok {
		return pending
	}
	if c.rc == nil {
		sc, ok := c.c.(syscall.Conn)
		if !ok {
			return false
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			return true
		}
		// Made once per connection, so a reuse allocates nothing.
		c.rc, c.peek = rc, func(fd uintptr) bool {
			var b [1]byte
			_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			// No error: surplus bytes, or 0 bytes because the upstream
			// closed. EAGAIN: nothing to read, the idle state.
			c.bad = !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EINTR)
			return true // never wait for readiness
		}
	}
	c.bad = false
	err := c.rc.Read(c.peek)
	return c.bad || err != nil
}

// begin readies c for an exchange, before its request is written.
func (c *Conn) begin() {
	c.interim = false
	c.scan.Arm()
}

// check applies internal/upframe's checks to the final answer just read
// on c: one that fails is neither relayed nor stored, and c is closed by
// the caller, never put back.
func (c *Conn) check(r *http.Request, resp *http.Response) error {
	if c.scan.Ambiguous() {
		return upframe.ErrAmbiguous
	}
	return upframe.Answer(r, resp)
}
