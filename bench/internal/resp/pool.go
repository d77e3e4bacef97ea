package resp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
)

// Pool is GET on pooled connections, for the bare Go server's Redis mode
// (lab.ServeBare -redis): the reference for what one Redis round trip
// costs a Go server, so it does no more than a round trip needs. A
// connection is taken from a free list (dialled when the list is empty),
// carries one command, and goes back; a connection that failed is closed.
// No deadlines and no retries: Redis is local and private to the bench.
type Pool struct {
	addr string
	mu   sync.Mutex
	free []*poolConn
}

type poolConn struct {
	c   net.Conn
	r   *bufio.Reader
	cmd []byte // the command being sent, reused
}

// NewPool is a pool of connections to the Redis at addr; it dials lazily.
func NewPool(addr string) *Pool { return &Pool{addr: addr} }

// Get is GET key: the value, or ok false when the key does not exist.
func (p *Pool) Get(key string) (v []byte, ok bool, err error) {
	pc, err := p.take()
	if err != nil {
		return nil, false, err
	}
	if v, ok, err = pc.get(key); err != nil {
		pc.c.Close()
		return nil, false, fmt.Errorf("redis get: %w", err)
	}
	p.mu.Lock()
	p.free = append(p.free, pc)
	p.mu.Unlock()
	return v, ok, nil
}

// Close closes the idle connections.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pc := range p.free {
		pc.c.Close()
	}
	p.free = nil
}

func (p *Pool) take() (*poolConn, error) {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		pc := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return pc, nil
	}
	p.mu.Unlock()
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		return nil, fmt.Errorf("redis dial: %w", err)
	}
	return &poolConn{c: c, r: bufio.NewReaderSize(c, 4096), cmd: make([]byte, 0, 64)}, nil
}

func (pc *poolConn) get(key string) ([]byte, bool, error) {
	b := append(pc.cmd[:0], "*2\r\n$3\r\nGET\r\n$"...)
	b = strconv.AppendInt(b, int64(len(key)), 10)
	b = append(b, "\r\n"...)
	b = append(b, key...)
	b = append(b, "\r\n"...)
	pc.cmd = b
	if _, err := pc.c.Write(b); err != nil {
		return nil, false, err
	}
	line, err := pc.r.ReadSlice('\n')
	if err != nil {
		return nil, false, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, false, fmt.Errorf("bad reply line %q", line)
	}
	switch line[0] {
	case '$':
	case '-':
		return nil, false, errors.New(string(line[1 : len(line)-2]))
	default:
		return nil, false, fmt.Errorf("unexpected reply %q", line)
	}
	if string(line) == "$-1\r\n" {
		return nil, false, nil
	}
	n := 0
	for _, c := range line[1 : len(line)-2] {
		if c < '0' || c > '9' || n > 1<<29 {
			return nil, false, fmt.Errorf("bad bulk length %q", line)
		}
		n = n*10 + int(c-'0')
	}
	v := make([]byte, n+2)
	if _, err := io.ReadFull(pc.r, v); err != nil {
		return nil, false, err
	}
	return v[:n], true, nil
}
