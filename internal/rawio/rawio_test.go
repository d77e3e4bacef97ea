package rawio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// tcpPair is a loopback TCP connection's two ends.
func tcpPair(t *testing.T) (a, b *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(); s.Close() })
	return s.(*net.TCPConn), d.(*net.TCPConn)
}

// rw is a Conn's reads and writes as an io.ReadWriter, or net.Conn's own:
// every behaviour test runs on both and must see the same.
type rw interface {
	Read([]byte) (int, error)
	Write([]byte) (int, error)
}

func both(t *testing.T, f func(t *testing.T, c net.Conn, io rw, peer *net.TCPConn)) {
	t.Run("net", func(t *testing.T) {
		a, b := tcpPair(t)
		f(t, a, a, b)
	})
	t.Run("raw", func(t *testing.T) {
		a, b := tcpPair(t)
		x := New(a)
		if runtime.GOOS == "linux" && !x.Raw() {
			t.Fatal("a TCP connection's Conn is not raw on Linux")
		}
		f(t, a, x, b)
	})
}

// On Linux a TCP connection's bytes go through the raw calls, both ways;
// on the code before this package there were none to count.
func TestTCPConnIsRaw(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("raw calls are Linux's")
	}
	a, b := tcpPair(t)
	x := New(a)
	if !x.Raw() {
		t.Fatal("not raw")
	}
	if _, err := x.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(b, got); err != nil || string(got) != "ping" {
		t.Fatalf("peer read %q, %v", got, err)
	}
	if _, err := b.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(x, got); err != nil || string(got) != "pong" {
		t.Fatalf("read %q, %v", got, err)
	}
	r, w := x.Calls()
	if r < 1 || w < 1 {
		t.Errorf("raw calls: %d reads, %d writes; want both > 0", r, w)
	}
}

// A datagram socket is not raw: a read of 0 bytes is not an end there.
func TestUDPIsNotRaw(t *testing.T) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	u, err := net.Dial("udp", c.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if New(u).Raw() {
		t.Error("a UDP connection's Conn is raw")
	}
}

// Bytes in both directions at once, larger than the socket buffers and
// in odd sizes: partial reads and writes lose and reorder nothing.
func TestLargeBothWays(t *testing.T) {
	both(t, func(t *testing.T, _ net.Conn, c rw, peer *net.TCPConn) {
		data := make([]byte, 8<<20+13)
		for i := range data {
			data[i] = byte(i * 7)
		}
		echoed := make(chan error, 1)
		go func() { // the peer echoes everything back
			_, err := io.Copy(peer, peer)
			echoed <- err
		}()
		wrote := make(chan error, 1)
		go func() {
			for p := data; len(p) > 0; {
				k := min(len(p), 100_003)
				if n, err := c.Write(p[:k]); err != nil || n != k {
					wrote <- err
					return
				}
				p = p[k:]
			}
			wrote <- peer.CloseRead() // not needed; keeps the peer's reads going
		}()
		got := make([]byte, 0, len(data))
		buf := make([]byte, 7001)
		for len(got) < len(data) {
			n, err := c.Read(buf)
			if err != nil {
				t.Fatalf("read after %d bytes: %v", len(got), err)
			}
			got = append(got, buf[:n]...)
		}
		if !bytes.Equal(got, data) {
			t.Error("bytes read differ from bytes written")
		}
		if err := <-wrote; err != nil {
			t.Errorf("write: %v", err)
		}
	})
}

// The peer's end of stream is io.EOF itself, after the bytes it sent.
func TestEOF(t *testing.T) {
	both(t, func(t *testing.T, _ net.Conn, c rw, peer *net.TCPConn) {
		peer.Write([]byte("last"))
		peer.CloseWrite()
		b, err := io.ReadAll(struct{ io.Reader }{c})
		if err != nil || string(b) != "last" {
			t.Fatalf("read %q, %v", b, err)
		}
		if n, err := c.Read(make([]byte, 8)); n != 0 || err != io.EOF {
			t.Fatalf("read at the end: %d, %v; want 0, io.EOF", n, err)
		}
	})
}

// A read waiting past its deadline fails as net.Conn's: a timeout, Op
// "read", os.ErrDeadlineExceeded; and so does the next, at once.
func TestReadDeadline(t *testing.T) {
	both(t, func(t *testing.T, nc net.Conn, c rw, _ *net.TCPConn) {
		nc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		for range 2 {
			n, err := c.Read(make([]byte, 8))
			checkOp(t, err, "read")
			var ne net.Error
			if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("read past the deadline: %d, %v", n, err)
			}
		}
	})
}

// A deadline moved into the past while a read waits ends the wait, as
// net/http's abortPendingRead does.
func TestReadDeadlineSetWhileWaiting(t *testing.T) {
	both(t, func(t *testing.T, nc net.Conn, c rw, _ *net.TCPConn) {
		done := make(chan error, 1)
		go func() {
			_, err := c.Read(make([]byte, 8))
			done <- err
		}()
		nc.SetReadDeadline(time.Unix(1, 0))
		if err := <-done; !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read: %v, want a deadline exceeded", err)
		}
	})
}

// A write to a peer that does not read waits once the socket's buffers
// are full; a deadline that passes then returns the bytes it wrote and a
// timeout, as net.Conn's. The deadline is set only once the peer's
// receive queue holds bytes of this write (a state, not a delay: a 50 ms
// deadline set up front lapsed before the first byte on a loaded CI
// machine, and the write then rightly wrote nothing).
func TestWriteDeadlineOnFullBuffer(t *testing.T) {
	both(t, func(t *testing.T, nc net.Conn, c rw, peer *net.TCPConn) {
		peer.SetReadBuffer(4 << 10)
		nc.(*net.TCPConn).SetWriteBuffer(4 << 10)
		p := make([]byte, 64<<20) // far past both buffers
		type result struct {
			n   int
			err error
		}
		done := make(chan result, 1)
		go func() {
			n, err := c.Write(p)
			done <- result{n, err}
		}()
		for queued(t, peer) == 0 {
			select {
			case r := <-done:
				t.Fatalf("write to a peer that does not read ended: %d of %d, %v", r.n, len(p), r.err)
			case <-time.After(time.Millisecond):
			}
		}
		nc.SetWriteDeadline(time.Now())
		r := <-done
		checkOp(t, r.err, "write")
		if r.n <= 0 || r.n >= len(p) || !errors.Is(r.err, os.ErrDeadlineExceeded) {
			t.Fatalf("write to a peer that does not read: %d of %d, %v", r.n, len(p), r.err)
		}
	})
}

// WriteNow writes what the socket takes and returns, without a deadline,
// when its buffer is full; the rest then goes with Write.
func TestWriteNowDoesNotWait(t *testing.T) {
	a, peer := tcpPair(t)
	c := New(a)
	p := make([]byte, 64<<20) // far past the socket's buffers, which grow to a few MiB

	for i := range p {
		p[i] = byte(i)
	}
	n, err := c.WriteNow(p)
	if err != nil || n >= len(p) {
		t.Fatalf("WriteNow to a full socket: %d of %d, %v", n, len(p), err)
	}
	if runtime.GOOS == "linux" && n == 0 {
		t.Fatal("WriteNow wrote nothing to an empty socket")
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(peer)
		got <- b
	}()
	if m, err := c.Write(p[n:]); err != nil || m != len(p)-n {
		t.Fatalf("the rest: %d, %v", m, err)
	}
	a.CloseWrite()
	if !bytes.Equal(<-got, p) {
		t.Error("the peer read other bytes than written")
	}
}

// A peer that resets the connection fails the read with ECONNRESET and
// the writes after it, as net.Conn's.
func TestPeerReset(t *testing.T) {
	both(t, func(t *testing.T, _ net.Conn, c rw, peer *net.TCPConn) {
		peer.SetLinger(0)
		peer.Close() // RST
		_, err := c.Read(make([]byte, 8))
		checkOp(t, err, "read")
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("read after a reset: %v", err)
		}
		var se *os.SyscallError
		if !errors.As(err, &se) || se.Syscall != "read" {
			t.Errorf("read error %#v: not a read SyscallError", err)
		}
		_, err = c.Write([]byte("x"))
		checkOp(t, err, "write")
		if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("write after a reset: %v", err)
		}
	})
}

// Closed: every call fails with net.ErrClosed, a zero-length one too;
// open, a zero-length call returns 0 and no error.
func TestZeroLengthAndClosed(t *testing.T) {
	both(t, func(t *testing.T, nc net.Conn, c rw, _ *net.TCPConn) {
		if n, err := c.Read(nil); n != 0 || err != nil {
			t.Errorf("zero-length read: %d, %v", n, err)
		}
		if n, err := c.Write(nil); n != 0 || err != nil {
			t.Errorf("zero-length write: %d, %v", n, err)
		}
		nc.Close()
		for _, p := range [][]byte{nil, make([]byte, 8)} {
			_, err := c.Read(p)
			checkOp(t, err, "read")
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("read(%d) after Close: %v", len(p), err)
			}
			_, err = c.Write(p)
			checkOp(t, err, "write")
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("write(%d) after Close: %v", len(p), err)
			}
		}
	})
}

// A Close while a read waits ends it with net.ErrClosed.
func TestCloseWhileReading(t *testing.T) {
	both(t, func(t *testing.T, nc net.Conn, c rw, _ *net.TCPConn) {
		done := make(chan error, 1)
		go func() {
			_, err := c.Read(make([]byte, 8))
			done <- err
		}()
		nc.Close()
		if err := <-done; !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read: %v, want net.ErrClosed", err)
		}
	})
}

// checkOp: err is a *net.OpError for op with both addresses, as net.Conn's.
func checkOp(t *testing.T, err error, op string) {
	t.Helper()
	oe, ok := err.(*net.OpError)
	if !ok {
		t.Fatalf("error %T %v, want *net.OpError", err, err)
	}
	if oe.Op != op || oe.Net != "tcp" || oe.Source == nil || oe.Addr == nil {
		t.Errorf("OpError %q %q %v %v, want %q tcp with both addresses", oe.Op, oe.Net, oe.Source, oe.Addr, op)
	}
}

// Pending: false on an idle connection, true once bytes or the peer's end
// are there, and it reads nothing.
func TestPending(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("raw calls are Linux's")
	}
	a, peer := tcpPair(t)
	c := New(a)
	if p, ok := c.Pending(); !ok || p {
		t.Fatalf("idle: Pending %v, %v; want false, true", p, ok)
	}
	peer.Write([]byte("x"))
	for p, _ := c.Pending(); !p; p, _ = c.Pending() { // until the byte is there
		runtime.Gosched()
	}
	b := make([]byte, 2)
	if n, err := c.Read(b); n != 1 || err != nil || b[0] != 'x' {
		t.Fatalf("read after Pending: %q, %v", b[:n], err)
	}
	if p, _ := c.Pending(); p {
		t.Fatal("Pending after the byte was read")
	}
	peer.Close()
	for p, _ := c.Pending(); !p; p, _ = c.Pending() { // until the end is there
		runtime.Gosched()
	}
	if _, err := c.Read(b); err != io.EOF {
		t.Fatalf("read at the end: %v", err)
	}
	a.Close()
	if p, _ := c.Pending(); !p {
		t.Error("closed: Pending false")
	}
}

// TCP keeps the connection's own methods: a half-close reaches the peer
// as the end of its stream, and the reads and writes are raw.
func TestTCPKeepsCloseWrite(t *testing.T) {
	a, peer := tcpPair(t)
	c := TCP(a)
	if runtime.GOOS == "linux" {
		if _, ok := c.(*TCPConn); !ok {
			t.Fatalf("TCP gave %T, want *TCPConn", c)
		}
	}
	if _, err := c.Write([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(peer); err != nil || string(b) != "bye" {
		t.Fatalf("peer read %q, %v", b, err)
	}
	peer.Write([]byte("ok"))
	peer.CloseWrite()
	if b, err := io.ReadAll(c); err != nil || string(b) != "ok" {
		t.Fatalf("read %q, %v", b, err)
	}
	if rc, ok := c.(*TCPConn); ok {
		if r, w := rc.Calls(); r == 0 || w == 0 {
			t.Errorf("%d raw reads, %d raw writes", r, w)
		}
	}
}
