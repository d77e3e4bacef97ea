// Package sendbound bounds how long a connection's writes may wait for
// the peer to take bytes: NGINX's proxy_send_timeout (the time between two
// successive writes to the upstream; the connection is closed after it).
//
// An upstream that accepts a connection and never reads it (an app server
// whose workers are all busy, the connection in its backlog) takes a
// request's first megabytes into its socket buffers and then none: a write
// with no deadline waits for good, holding the upstream connection, the
// handler and the client's connection, whose own bytes (and its FIN) queue
// behind the body nobody reads. The response-header timeout starts only
// once the request is written, and the client's context never ends, so
// nothing else ends such a write (probe D2: still held at 240 s).
//
// Conn moves the write deadline forward as bytes are taken: a write fails
// with a timeout (os.ErrDeadlineExceeded, Timeout() true) once the peer
// took no chunk of it for d, never while a large body keeps moving,
// however long the whole takes. The caller closes the connection on the
// failure, as http.Transport does.
package sendbound

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// chunk is the most one underlying write is given, so that the deadline
// moves with the progress of a large write rather than bounding it whole
// (io.Copy's writes are 32 KiB: one chunk each).
const chunk = 64 << 10

// Conn is a net.Conn whose writes are bounded (see the package doc). Its
// reads, deadlines for reads, and every other method are the wrapped
// connection's.
type Conn struct {
	net.Conn
	// d is the bound, 0 once lifted (Lift).
	d atomic.Int64
	// armed is when the write deadline was last moved, in nanoseconds
	// since base: moved again only after d/8 more, as a deadline set is a
	// timer's reset (a write waits d at least, d + d/8 at most).
	armed atomic.Int64
	base  time.Time
}

// Wrap returns c with each write bounded by d without progress; c as it
// is when d <= 0.
func Wrap(c net.Conn, d time.Duration) net.Conn {
	if d <= 0 {
		return c
	}
	b := &Conn{Conn: c, base: time.Now()}
	b.d.Store(int64(d))
	b.armed.Store(-int64(d)) // the first write sets the deadline
	return b
}

// Write writes p in chunks, each under a deadline at least d away when it
// starts.
func (c *Conn) Write(p []byte) (int, error) {
	var n int
	for len(p) > 0 {
		q := p
		if len(q) > chunk {
			q = q[:chunk]
		}
		d := time.Duration(c.d.Load())
		if d == 0 {
			m, err := c.Conn.Write(p)
			return n + m, err
		}
		now := int64(time.Since(c.base))
		if now-c.armed.Load() > int64(d/8) {
			c.armed.Store(now)
			_ = c.Conn.SetWriteDeadline(c.base.Add(time.Duration(now) + d + d/8))
		}
		m, err := c.Conn.Write(q)
		n += m
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				err = &Error{d: d, err: err}
			}
			return n, err
		}
		p = p[m:]
	}
	return n, nil
}

// Error is a write cut for lack of progress: a timeout, as the deadline's
// error it wraps.
type Error struct {
	d   time.Duration
	err error
}

func (e *Error) Error() string {
	return fmt.Sprintf("sendbound: the peer took no byte for %v: %v", e.d, e.err)
}
func (e *Error) Unwrap() error { return e.err }
func (e *Error) Timeout() bool { return true }

// Lift takes the bound off c for good, its write deadline with it: c was
// switched to another protocol (Switched), whose writes are bounded
// otherwise. It must not run beside a Write.
func (c *Conn) Lift() {
	c.d.Store(0)
	_ = c.Conn.SetWriteDeadline(time.Time{})
}

// Bound is c's bound, 0 once lifted.
func (c *Conn) Bound() time.Duration { return time.Duration(c.d.Load()) }

// Cut reports whether err is, or wraps, a write Conn cut.
func Cut(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// NetConn is the wrapped connection, as tls.Conn's NetConn.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// CloseWrite is the wrapped connection's: httputil.ReverseProxy
// half-closes an upgraded connection's upstream side through it.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return fmt.Errorf("sendbound: CloseWrite: %w", http.ErrNotSupported)
}
