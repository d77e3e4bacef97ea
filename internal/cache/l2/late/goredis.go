package late

import (
	"context"
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// go-redis's connections follow the lean client's rule (late.go) where
// its error shapes let them. Its commands go through a bufio.Writer and a
// proto.Reader, which return the socket's error as is, so what the
// socket's Write or Read returns is the command's error, and the store's
// done's — unless go-redis retries. It retries a timeout (MaxRetries), and since
// the socket's deadline is the call's context's (ContextTimeoutEnabled),
// the retry's backoff returns context.DeadlineExceeded at once, which
// replaces the first error and counts (as it must after a Redis that did
// not answer). So a lateConn reports lateness as goLate, which go-redis
// cannot look into — not a timeout, not a dial error, not a Redis error:
// it does not retry it (the retry could only fail, the deadline has
// passed) and drops the connection (isBadConn), as after any transport
// error. Timeouts that are Redis's stay net's, and are retried and
// counted as before.
//
// A pool wait that times out (redis.ErrPoolTimeout) is lateness too (the
// store checks for it beside Is): the connections are held by this
// sidecar's other calls, which count their own outcomes. go-redis retries it, so PoolTimeout is a quarter of
// Timeout: both attempts' waits end before the call's deadline, whose
// context.DeadlineExceeded would count. A dial goes on in the background
// of the call, which returns the context's error when its deadline comes
// first, so a late dial cannot be told apart on these paths and counts.

// goLate is a go-redis connection's lateness (an Error), opaque to
// go-redis: no Unwrap, no Timeout. Is sees through it.
type goLate struct{ err error }

func (e *goLate) Error() string { return e.err.Error() }

// hide makes an Error opaque to go-redis; other errors pass as they are.
func hide(err error) error {
	if err != nil && Is(err) {
		return &goLate{err: err}
	}
	return err
}

// DialerOptions are a Dialer's.
type DialerOptions struct {
	Timeout time.Duration // the dial's (go-redis's DialTimeout)
	Stall   Stall         // tests only: runs before each write and read
}

// Dialer is go-redis's Dialer (redis.Options.Dialer): go-redis's default
// one (net's, with its keep-alive policy: probes after 30 s idle, 3 of them
// 5 s apart), the connection wrapped in a lateConn.
func Dialer(o DialerOptions) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: o.Timeout, KeepAliveConfig: net.KeepAliveConfig{
		Enable: true, Idle: 30 * time.Second, Interval: 5 * time.Second, Count: 3,
	}}
	stall := o.Stall
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		sc, ok := nc.(syscall.Conn)
		if !ok { // go-redis's health check needs syscall.Conn: keep nc as is
			return nc, nil
		}
		return &lateConn{Conn: nc, sc: sc, stall: stall}, nil
	}
}

// lateConn marks a go-redis connection's failures that are the sidecar's
// lateness: a write deadline that passed before any byte of the command
// round was written, a read that timed out with the reply already in the
// receive buffer. go-redis sets the write deadline before each round's
// writes (pool.Conn.WithWriter), so that is where the round's count
// restarts. It is a syscall.Conn, as go-redis's pool health check (a
// MSG_PEEK before reuse) wants.
type lateConn struct {
	net.Conn
	sc    syscall.Conn
	wrote atomic.Int64 // bytes written since the write deadline was last set

	stall Stall // tests only (DialerOptions.Stall)
}

// SyscallConn is the socket's.
func (c *lateConn) SyscallConn() (syscall.RawConn, error) { return c.sc.SyscallConn() }

func (c *lateConn) SetDeadline(t time.Time) error {
	c.wrote.Store(0)
	return c.Conn.SetDeadline(t)
}

func (c *lateConn) SetWriteDeadline(t time.Time) error {
	c.wrote.Store(0)
	return c.Conn.SetWriteDeadline(t)
}

func (c *lateConn) Write(p []byte) (int, error) {
	if c.stall != nil {
		c.stall(BeforeWrite, c.Conn)
	}
	n, err := c.Conn.Write(p)
	w := c.wrote.Add(int64(n))
	if err != nil {
		return n, hide(WriteFailed(int(w), err))
	}
	return n, nil
}

func (c *lateConn) Read(p []byte) (int, error) {
	if c.stall != nil {
		c.stall(BeforeRead, c.Conn)
	}
	n, err := c.Conn.Read(p)
	if err != nil {
		return n, hide(ReadFailed(c.Conn, err))
	}
	return n, nil
}
