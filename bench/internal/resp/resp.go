// Package resp is the bench's minimal RESP2 client: the bench module keeps
// no Redis client library, and the commands it sends (PING, INFO, SCAN, GET
// for the plain-GET reference, PUBLISH, PUBSUB NUMSUB) must cost Redis what
// any client's command costs, nothing more. The fleet's pub/sub readers
// parse their pushes themselves (fleet/peer.go), byte slices on a hot path;
// Pool is GET alone on pooled connections, for the bare Go server's Redis
// mode, where the client's own cost is part of what is measured.
package resp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// Command is one command as a RESP2 array of bulk strings.
func Command(args ...string) []byte {
	b := make([]byte, 0, 64)
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, "\r\n"...)
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, "\r\n"...)
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	return b
}

// Conn is one connection to Redis, for one command at a time.
type Conn struct {
	c net.Conn
	r *bufio.Reader
}

// Dial connects to the Redis at addr.
func Dial(ctx context.Context, addr string) (*Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &Conn{c: c, r: bufio.NewReader(c)}, nil
}

func (c *Conn) Close() error { return c.c.Close() }

// Do sends one command and reads its reply, within 5s: a string (simple
// or bulk), an int64, nil, or a []any; an error reply is returned as an
// error.
func (c *Conn) Do(args ...string) (any, error) {
	_ = c.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.c.Write(Command(args...)); err != nil {
		return nil, err
	}
	return c.read()
}

func (c *Conn) read() (any, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return nil, errors.New("redis: empty reply line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, errors.New("redis: " + body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, b); err != nil {
			return nil, err
		}
		return string(b[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = c.read(); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("redis: unexpected reply %q", line)
}

// Do sends one command to the Redis at addr on a connection of its own.
func Do(ctx context.Context, addr string, args ...string) (any, error) {
	c, err := Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Do(args...)
}
