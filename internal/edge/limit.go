package edge

import (
	"fmt"
	"net"
	"time"

	"github.com/sidecache/sidecache/internal/connlimit"
	"github.com/sidecache/sidecache/internal/rawio"
	"github.com/sidecache/sidecache/internal/sendbudget"
)

// The connection bound (server.max_connections; internal/connlimit).
//
// A listener from CappedListener accepts a connection only while it has a
// slot for it, or an idle keep-alive connection to close for it (the
// oldest idle first, NGINX's reusable connections); with neither, it
// stops accepting, and new connections wait in the kernel's accept
// backlog (HAProxy's maxconn) until a connection goes idle or ends.
//
// A connection holds its slot from its accept until its socket is closed
// (closeSocket), whoever closes it: net/http, a write cut at
// write_timeout, the end of a lingering close (linger.go), or the owner
// of a hijacked connection (an upgrade's tunnel, which keeps its slot as
// long as it lives and is never closed to make room). It is idle, and may
// be closed for a new one, from net/http's StateIdle (its answer flushed)
// until its client sends a byte (Read) or net/http reads a request it had
// already buffered (StateActive); a connection whose next request came
// pipelined behind the last is never marked idle (begun).

// CappedListener is Listener whose connections are bounded by lim (nil:
// none), and the bytes their waiting writes hold by sends (nil: none;
// sendbudget.go). Pair it with Wire, which tells lim which connections
// are idle.
func CappedListener(ln net.Listener, writeTimeout time.Duration, count Counter, lim *connlimit.Limiter, sends *sendbudget.Budget) net.Listener {
	return &listener{Listener: ln, wt: writeTimeout, count: count, lim: lim, sends: sends, done: make(chan struct{})}
}

// acceptLimited is Accept under lim: it waits for room before it
// accepts, and, when the room it saw was an idle connection that took a
// request meanwhile, holds the connection it accepted (accepting no
// other) until there is room for it.
func (l *listener) acceptLimited() (net.Conn, error) {
	if err := l.lim.Wait(l.done); err != nil {
		return nil, fmt.Errorf("edge: accept: %w", net.ErrClosed)
	}
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	ec := &Conn{Conn: c, wt: l.wt, count: l.count, io: rawio.New(c), sends: l.sends, heads: l.heads}
	for {
		if s, ok := l.lim.Take(ec.reap); ok {
			ec.slot = s
			return ec, nil
		}
		if err := l.lim.Wait(l.done); err != nil {
			c.Close()
			return nil, fmt.Errorf("edge: accept: %w", net.ErrClosed)
		}
	}
}

// Close ends the waits of Accept, then closes the listener.
func (l *listener) Close() error {
	if l.done != nil {
		l.closeOnce.Do(func() { close(l.done) })
	}
	return l.Listener.Close()
}

// reap closes the idle c at once to give its slot to a new connection,
// unless its client has sent bytes not read yet (a request on its way):
// then it reports false and closes nothing. An idle connection owes
// nothing, so it needs no lingering close; net/http's read of it fails,
// and it ends the connection as after any close.
func (c *Conn) reap() bool {
	if pending(c.Conn) {
		return false
	}
	_ = c.Conn.Close()
	return true
}

// closeSocket closes c's socket and gives its slot back.
func (c *Conn) closeSocket() error {
	err := c.Conn.Close()
	c.endHeaders()
	if c.slot != nil {
		c.slot.Release()
	}
	return err
}
