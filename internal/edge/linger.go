package edge

import (
	"sync"
	"time"
)

// A header section over MaxHeaderBytes is answered 431 by net/http as soon
// as it has read that much (Wire), while the client, which does not read
// before it has sent its request, is still sending the rest. net/http then
// waits half a second and closes the connection with that rest unread;
// a TCP close with data pending, or data that comes after it, sends a
// reset (RFC 1122 §4.2.2.13), which fails the client's write before it
// reads at all, or makes its stack drop what it had received and not yet
// read, the 431 with it. The client saw a reset, never the 431.
// RFC 9112 §9.6 has a server that closes while the client may still send
// close its sending side first and read on ("lingering close", NGINX's
// lingering_close): the client's write completes, it reads the 431, then
// the end of the stream, and closes.
//
// So after net/http's 431 the connection half-closes (the 431 is whole)
// and drains what the client sends, for at most lingerTime, and closes
// only then; net/http's Close meanwhile is the drain's to make. Not after
// its other refusals (400, 501, 505), which come before it has read the
// header section's end and may wait on a client that sends no more.

// lingerTime bounds the drain after a 431: time enough for a client to
// finish sending a header section of a few MiB over a slow link (NGINX's
// lingering_time is 30 s, its lingering_timeout between reads 5 s), short
// enough that a refused client holds a connection no longer than a slow
// one would.
const lingerTime = 2 * time.Second

// lingering is the drain of one connection.
type lingering struct {
	mu     sync.Mutex
	done   bool // the drain is over; Close closes at once
	closed bool // Close was called meanwhile; the drain closes
}

// lingerAfter half-closes c and starts its drain. A connection that
// cannot half-close (not TCP) closes as net/http closes it.
func (c *Conn) lingerAfter() {
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	l := new(lingering)
	c.linger.Store(l)
	go func() {
		_ = c.Conn.SetReadDeadline(time.Now().Add(lingerTime))
		buf := make([]byte, 32<<10)
		for {
			if _, err := c.Conn.Read(buf); err != nil {
				break
			}
		}
		l.mu.Lock()
		l.done = true
		closed := l.closed
		l.mu.Unlock()
		if closed {
			_ = c.Conn.Close()
		}
	}()
}

// Close closes c, or, while c drains after a 431, leaves that to the
// drain.
func (c *Conn) Close() error {
	if l := c.linger.Load(); l != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.done {
			l.closed = true
			return nil
		}
	}
	return c.Conn.Close()
}
