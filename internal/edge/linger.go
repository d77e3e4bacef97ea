package edge

import (
	"sync"
	"time"
)

// net/http answers some requests itself and closes (wire.go): a header
// section over MaxHeaderBytes 431 as soon as it has read that much, a
// request line, header or Host it cannot parse 400, a transfer coding
// it does not know 501, a version 505, an Expect 417, each before it has
// read the body. The client, which does not read before it has sent its
// request, is still sending the rest. net/http then closes the
// connection with that rest unread (after half a second for the 431, at
// once for the others); a TCP close with data pending, or data that
// comes after it, sends a reset (RFC 1122 §4.2.2.13), which fails the
// client's write before it reads at all, or makes its stack drop what it
// had received and not yet read, the refusal with it. The client saw a
// reset, never the status. RFC 9112 §9.6 has a server that closes while
// the client may still send close its sending side first and read on
// ("lingering close", NGINX's lingering_close): the client's write
// completes, it reads the refusal, then the end of the stream, and
// closes.
//
// So after every refusal of net/http's own, one rule, the connection
// half-closes (the refusal is whole) and drains what the client sends,
// for at most lingerTime, and closes only then; net/http's Close
// meanwhile is the drain's to make. A client that sends no more and does
// not close holds the connection lingerTime at most: the end of stream
// it reads tells it to close.

// lingerTime bounds the drain after a refusal: time enough for a client
// to finish sending a header section or body of a few MiB over a slow
// link (NGINX's lingering_time is 30 s, its lingering_timeout between
// reads 5 s), short enough that a refused client holds a connection no
// longer than a slow one would.
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

// Close closes c, or, while c drains after net/http's refusal, leaves
// that to the drain.
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
