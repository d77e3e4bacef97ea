package upframe

import (
	"fmt"
	"net"
	"net/http"
	"sync"
)

// Conn is an upstream connection whose answers' header sections are
// scanned (Scanner): the http.Transport's dialer wraps each connection it
// makes with Wrap, and Check asks the one an answer came on. Its writes
// (the transport's write loop) and reads (its read loop) run on two
// goroutines, hence the lock, held for no I/O.
type Conn struct {
	net.Conn
	mu sync.Mutex
	s  Scanner
}

// Wrap returns c with its answers' framing scanned.
func Wrap(c net.Conn) *Conn { return &Conn{Conn: c} }

func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.s.Feed(p[:n])
		c.mu.Unlock()
	}
	return n, err
}

func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.s.Arm()
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// Ambiguous reports whether the last answer's final header section on c
// carried both Content-Length and Transfer-Encoding.
func (c *Conn) Ambiguous() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s.Ambiguous()
}

// NetConn is the wrapped connection, as tls.Conn's NetConn.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// CloseWrite is the wrapped connection's: ReverseProxy half-closes an
// upgraded connection's upstream side through it.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return fmt.Errorf("upframe: CloseWrite: %w", http.ErrNotSupported)
}
