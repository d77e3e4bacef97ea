package edge

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
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

// The connection's bytes go through internal/rawio's raw calls both ways,
// on Linux: a request's read and its answer's write enter no
// syscall.Syscall, so no sysmon wake (rawio's doc).
func TestConnReadsAndWritesRaw(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("raw calls are Linux's")
	}
	for _, wt := range []time.Duration{0, time.Minute} {
		_, c, client := pair(t, wt)
		if _, err := client.Write([]byte("GET / HTTP/1.1\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("HTTP/1.1 204 No Content\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Read(buf); err != nil {
			t.Fatal(err)
		}
		r, w := c.(*Conn).io.Calls()
		if r == 0 || w == 0 {
			t.Errorf("write_timeout %v: %d raw reads, %d raw writes; want both > 0", wt, r, w)
		}
	}
}

// net/http's own timeouts still end connections accepted through
// Listener: their reads wait in net's poller, where deadlines apply. A
// request head that stops coming is cut at ReadTimeout before any handler
// runs; a keep-alive connection idle past IdleTimeout is closed; a body
// that stops coming fails the handler's read.
func TestServerTimeoutsOnRawConn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int32
	bodyErr := make(chan error, 1)
	srv := Wire(&http.Server{
		ReadTimeout: 100 * time.Millisecond,
		IdleTimeout: 100 * time.Millisecond,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			handled.Add(1)
			if r.Method == http.MethodPost {
				_, err := io.ReadAll(r.Body)
				bodyErr <- err
				return
			}
			w.Write([]byte("ok"))
		}),
	})
	go srv.Serve(Listener(ln, time.Minute, nil))
	t.Cleanup(func() { srv.Close() })
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	// A head that stops half way: closed, nothing answered, no handler.
	c := dial()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n")
	if b, err := io.ReadAll(c); err != nil || len(b) != 0 || handled.Load() != 0 {
		t.Errorf("stalled head: read %q, %v, %d handled; want the connection closed unanswered", b, err, handled.Load())
	}

	// An answered request, then idle: closed after IdleTimeout.
	c = dial()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("idle keep-alive connection: read %d, %v; want it closed (EOF)", n, err)
	}

	// A body that stops coming: the handler's read fails.
	c = dial()
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
	var ne net.Error
	if err := <-bodyErr; !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("stalled body: handler read %v, want a timeout", err)
	}
}
