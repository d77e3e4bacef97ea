package edge

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// countingListener hands out connections that count the write deadlines
// set on them.
type countingListener struct {
	net.Listener
	deadlines atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{TCPConn: c.(*net.TCPConn), n: &l.deadlines}, nil
}

type countingConn struct {
	*net.TCPConn
	n *atomic.Int32
}

func (c *countingConn) SetWriteDeadline(t time.Time) error {
	c.n.Add(1)
	return c.TCPConn.SetWriteDeadline(t)
}

// pair is a connection accepted through Listener(wt) and its client.
func pair(t *testing.T, wt time.Duration) (*countingListener, net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	cl := &countingListener{Listener: ln}
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	c, err := Listener(cl, wt, nil).Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return cl, c, client
}

// A write the socket takes at once cannot stall, so it sets no deadline:
// the send_timeout costs nothing to a client that reads. On the code that
// set one before every write, 100 writes set 100.
func TestConnWriteThatDoesNotBlockSetsNoDeadline(t *testing.T) {
	cl, c, client := pair(t, time.Minute)
	read := make(chan int64)
	go func() {
		n, _ := io.Copy(io.Discard, client)
		read <- n
	}()
	p := make([]byte, 1024)
	for range 100 {
		if n, err := c.Write(p); err != nil || n != len(p) {
			t.Fatalf("write: %d, %v", n, err)
		}
	}
	c.Close()
	if n := <-read; n != 100*1024 {
		t.Errorf("client read %d bytes, want %d", n, 100*1024)
	}
	if n := cl.deadlines.Load(); n != 0 {
		t.Errorf("%d write deadlines set for writes that did not block, want 0", n)
	}
}

// A client that stops reading still has its connection cut after the
// window: the write that fills the socket's buffer waits under the
// deadline, fails with it, and the connection is closed, so every later
// write fails at once.
func TestConnWriteToStalledClientTimesOut(t *testing.T) {
	cl, c, client := pair(t, 100*time.Millisecond)
	_ = client.(*net.TCPConn).SetReadBuffer(4 << 10)
	p := make([]byte, 64<<10)
	var err error
	for sent := 0; sent < 256<<20 && err == nil; sent += len(p) { // far past any socket buffer
		_, err = c.Write(p)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a client that does not read: %v, want a deadline exceeded", err)
	}
	if cl.deadlines.Load() == 0 {
		t.Error("no write deadline was set for a write that blocked")
	}
	if _, err := c.Write([]byte("x")); err == nil {
		t.Error("a write after the timeout succeeded: the connection was not closed")
	}
}
