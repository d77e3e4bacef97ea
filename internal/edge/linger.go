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
// A handler's answer can close a connection its client is still sending
// on as well: an answer made before the body was read to its end carries
// Connection: close, and net/http drains at most 256 KiB of the rest, or
// nothing. A write sent chunked behind Expect: 100-continue to an
// upstream that sends a 100 of its own and answers without reading the
// body is one: the upstream's 100 starts the body, which sends the
// client net/http's 100 Continue, so the client owes its body and sends
// it while it reads the answer; the answer relayed, net/http's end of
// request aborts the body read ReverseProxy's Transport still has
// pending, which leaves the chunked reader failed, and closes at once
// with nothing drained. The client's write met a reset, and its Go
// Transport closed the connection under the answer it was reading ("use
// of closed network connection"). The sidecar's own refusals (Guard,
// 408, 431) and a 504 to a body the upstream would not take close the
// same way.
//
// So the rule is the connection's, whoever closes it: a connection
// closed while its client may still be sending (the bytes read so far
// end inside a request, as the framing scan follows them: fold.go), or
// after a refusal of net/http's own, half-closes (the answer is whole)
// and drains what the client sends, for at most lingerTime, and closes
// only then; net/http's Close meanwhile is the drain's to make. One
// closed between requests (idle, shut down) closes at once, and a
// hijacked one is its new owner's (a tunnel). A client that sends no
// more and does not close holds the connection lingerTime at most: the
// end of stream it reads tells it to close.

// lingerTime bounds the drain: time enough for a client
// to finish sending a header section or body of a few MiB over a slow
// link (NGINX's lingering_time is 30 s, its lingering_timeout between
// reads 5 s), short enough that a refused client holds a connection no
// longer than a slow one would.
const lingerTime = 2 * time.Second

// lingerBuf is the drain's read size. Small: a drain mostly waits (a
// client that sends nothing more), and many drain at once when the
// header budget (headerbudget.go) answers a flood of stalled sections
// 431 — 3550 drains of 32 KiB each held 111 MB, more than the sections
// they replaced. 4 KiB still drains a 32 MiB section in 8192 reads.
const lingerBuf = 4 << 10

// lingering is the drain of one connection.
type lingering struct {
	mu     sync.Mutex
	done   bool // the drain is over; Close closes at once
	closed bool // Close was called meanwhile; the drain closes
}

// lingerAfter half-closes c and starts its drain, once. A connection
// that cannot half-close (not TCP, or closed already) closes as net/http
// closes it.
func (c *Conn) lingerAfter() {
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok {
		return
	}
	l := new(lingering)
	if !c.linger.CompareAndSwap(nil, l) {
		return // draining already
	}
	if cw.CloseWrite() != nil {
		l.mu.Lock()
		l.done = true
		l.mu.Unlock()
		return
	}
	go func() {
		_ = c.Conn.SetReadDeadline(time.Now().Add(lingerTime))
		buf := make([]byte, lingerBuf)
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
			_ = c.closeSocket()
		}
	}()
}

// Close closes c, or, while its client may still be sending, starts the
// drain and leaves the close to it (so too while c drains after
// net/http's refusal).
func (c *Conn) Close() error {
	if c.owed.Load() && !c.left.Load() {
		c.lingerAfter()
	}
	if l := c.linger.Load(); l != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.done {
			l.closed = true
			return nil
		}
	}
	return c.closeSocket()
}
