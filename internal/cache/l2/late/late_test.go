package late

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// pair is a connected TCP pair on a real socket: the client's end and the
// server's.
func pair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestWriteFailed: a write whose deadline had passed wrote nothing and is
// lateness, its connection clean (Unsent); a partial write is not.
func TestWriteFailed(t *testing.T) {
	c, _ := pair(t)
	if err := c.SetWriteDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := c.Write([]byte("PING\r\n"))
	err = WriteFailed(n, err)
	var le *Error
	if !Is(err) || !errors.As(err, &le) || !le.Unsent() {
		t.Fatalf("write past its deadline (%d bytes) = %v; want lateness, unsent", n, err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("lateness %v does not wrap the timeout", err)
	}
	if err := WriteFailed(1, ne); Is(err) {
		t.Fatalf("a partial write = %v; want it counted", err)
	}
}

// TestReadFailed: a read that timed out with the reply in the receive
// buffer is lateness; one with nothing received is not.
func TestReadFailed(t *testing.T) {
	c, s := pair(t)
	if err := c.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 8))
	if err := ReadFailed(c, err); Is(err) {
		t.Fatalf("read timed out with nothing received = %v; want it counted", err)
	}
	if _, err := s.Write([]byte("+PONG\r\n")); err != nil {
		t.Fatal(err)
	}
	for !Pending(c) { // the reply crosses loopback
		time.Sleep(time.Millisecond)
	}
	_, err = c.Read(make([]byte, 8))
	if err := ReadFailed(c, err); !Is(err) {
		t.Fatalf("read timed out with the reply received = %v; want lateness", err)
	}
}

// TestDial: a dial refused is not lateness; a dial whose deadline passed
// while its connection was being established (the dialing goroutine held
// before connect until the deadline) is.
func TestDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dl := time.Now().Add(200 * time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), dl)
	defer cancel()
	d := net.Dialer{Control: func(_, _ string, _ syscall.RawConn) error {
		for time.Now().Before(dl) {
			time.Sleep(time.Until(dl) + time.Millisecond)
		}
		return nil
	}}
	if nc, err := Dial(ctx, d, addr); err == nil || !Is(err) {
		if nc != nil {
			nc.Close()
		}
		t.Fatalf("dial late = %v; want lateness", err)
	}
	ln.Close()
	if _, err := Dial(context.Background(), net.Dialer{}, addr); err == nil || Is(err) {
		t.Fatalf("dial refused = %v; want an error counted", err)
	}
}

// TestHide: the go-redis form of lateness is opaque (no Unwrap, so no
// timeout go-redis would retry) and still Is; other errors pass as is.
func TestHide(t *testing.T) {
	base := &net.OpError{Op: "read", Err: context.DeadlineExceeded}
	h := hide(Mark(base))
	if !Is(h) || errors.Unwrap(h) != nil {
		t.Fatalf("hide(Mark(err)) = %#v; want an opaque lateness", h)
	}
	if hide(base) != error(base) {
		t.Fatal("hide changed an error that is not lateness")
	}
}
