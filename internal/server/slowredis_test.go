package server_test

import (
	"bytes"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowRedis is a TCP proxy in front of Redis that delays every byte by
// delay in each direction (a Redis slow but within l2.redis.timeout, as
// the prober's tcpdelay), and counts, at the wire, the commands that name
// marker: how many the sidecar sent, and how many round trips it waited
// out whole (the reply reached it). Its connections' commands and replies
// are matched in order (RESP, one reply per command); a subscriber's
// connection, whose pushes answer no command, is not counted.
type slowRedis struct {
	ln       net.Listener
	target   string
	delay    atomic.Int64 // ns, each direction
	marker   atomic.Pointer[string]
	sent     atomic.Int64 // commands naming marker, sent towards Redis
	answered atomic.Int64 // their replies, delivered to the sidecar
}

func startSlowRedis(t *testing.T, target string) *slowRedis {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &slowRedis{ln: ln, target: target}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			pc := &proxiedConn{p: p}
			wg.Add(2)
			go func() { defer wg.Done(); p.pump(c, s, pc.commands, nil); s.Close(); c.Close() }()
			go func() { defer wg.Done(); p.pump(s, c, nil, pc.replies); s.Close(); c.Close() }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return p
}

func (p *slowRedis) Addr() string { return p.ln.Addr().String() }

// watch starts counting the commands that name marker, from zero.
func (p *slowRedis) watch(marker string) {
	p.sent.Store(0)
	p.answered.Store(0)
	p.marker.Store(&marker)
}

// pump copies src to dst, each chunk delay after it was read. read, if
// not nil, is told each chunk as it is read (a command is counted as the
// sidecar sends it); seen, if not nil, once it is written (or could not
// be: a reply is counted as the sidecar gets it).
func (p *slowRedis) pump(src, dst net.Conn, read func(chunk []byte), seen func(chunk []byte, written bool)) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	ch := make(chan chunk, 1024)
	go func() {
		defer close(ch)
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				b := bytes.Clone(buf[:n])
				if read != nil {
					read(b)
				}
				ch <- chunk{b: b, at: time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range ch {
		if d := time.Until(c.at.Add(time.Duration(p.delay.Load()))); d > 0 {
			time.Sleep(d)
		}
		_, err := dst.Write(c.b)
		if seen != nil {
			seen(c.b, err == nil)
		}
		if err != nil {
			for range ch {
			}
			return
		}
	}
}

// proxiedConn matches one connection's commands with their replies.
type proxiedConn struct {
	p      *slowRedis
	mu     sync.Mutex
	out    []byte // commands not yet whole
	in     []byte // replies not yet whole
	named  []bool // per command awaiting its reply: it names the marker
	pubsub bool
}

func (c *proxiedConn) commands(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.out = append(c.out, b...)
	for {
		n := respLen(c.out)
		if n <= 0 {
			return
		}
		cmd := c.out[:n]
		c.out = c.out[n:]
		if bytes.Contains(bytes.ToUpper(cmd), []byte("SUBSCRIBE")) {
			c.pubsub = true
		}
		m := c.p.marker.Load()
		named := m != nil && *m != "" && bytes.Contains(cmd, []byte(*m))
		if named {
			c.p.sent.Add(1)
		}
		c.named = append(c.named, named)
	}
}

func (c *proxiedConn) replies(b []byte, written bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.in = append(c.in, b...)
	for {
		n := respLen(c.in)
		if n <= 0 {
			return
		}
		push := c.in[0] == '>'
		c.in = c.in[n:]
		if c.pubsub || push || len(c.named) == 0 {
			continue
		}
		if c.named[0] && written {
			c.p.answered.Add(1)
		}
		c.named = c.named[1:]
	}
}

// respLen is the length of the first whole RESP2/RESP3 value in b, 0 when
// b does not hold one yet.
func respLen(b []byte) int {
	line := bytes.Index(b, []byte("\r\n"))
	if line < 0 {
		return 0
	}
	head := line + 2
	switch b[0] {
	case '+', '-', ':', ',', '#', '_', '(':
		return head
	case '$', '!', '=':
		n, err := strconv.Atoi(string(b[1:line]))
		if err != nil || n < 0 {
			return head
		}
		if len(b) < head+n+2 {
			return 0
		}
		return head + n + 2
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(string(b[1:line]))
		if err != nil || n < 0 {
			return head
		}
		if b[0] == '%' || b[0] == '|' {
			n *= 2
		}
		at := head
		for range n {
			m := respLen(b[at:])
			if m == 0 {
				return 0
			}
			at += m
		}
		if b[0] == '|' { // an attribute: the reply it describes follows
			m := respLen(b[at:])
			if m == 0 {
				return 0
			}
			at += m
		}
		return at
	}
	return head // inline: one line
}
