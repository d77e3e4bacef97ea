package rawio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"
)

// ask is Conn's Ask, or Write then Read for net.Conn: every Ask test
// runs on both and must see the same.
func ask(c rw, req, p []byte) (wrote, n int, err error) {
	if x, ok := c.(*Conn); ok {
		return x.Ask(req, p)
	}
	wrote, err = c.Write(req)
	if err != nil {
		return wrote, 0, err
	}
	n, err = c.Read(p)
	return wrote, n, err
}

// echo answers each request the peer reads with reply, after delay.
func echo(t *testing.T, peer *net.TCPConn, size int, reply []byte, delay time.Duration) {
	t.Helper()
	go func() {
		buf := make([]byte, size)
		for {
			if _, err := io.ReadFull(peer, buf); err != nil {
				return
			}
			time.Sleep(delay)
			if _, err := peer.Write(reply); err != nil {
				return
			}
		}
	}()
}

// Ask writes the request and returns the reply; on Linux it reads the
// reply with one read system call, once it is there, where Write then
// Read makes a read that finds nothing first (the reply comes 5 ms after
// the request here).
func TestAskOneRead(t *testing.T) {
	both(t, func(t *testing.T, _ net.Conn, c rw, peer *net.TCPConn) {
		echo(t, peer, 4, []byte("pong"), 5*time.Millisecond)
		const n = 20
		for range n {
			p := make([]byte, 16)
			w, m, err := ask(c, []byte("ping"), p)
			if err != nil || w != 4 || string(p[:m]) != "pong" {
				t.Fatalf("ask: wrote %d, read %q, %v", w, p[:m], err)
			}
		}
		if x, ok := c.(*Conn); ok && runtime.GOOS == "linux" {
			if r, w := x.Calls(); r != n || w != n {
				t.Errorf("%d asks made %d raw reads and %d raw writes; want one each per ask", n, r, w)
			}
		}
	})
}

// A request larger than the socket's buffers is written whole (the rest
// after the first call, under the write deadline) before the reply is read.
func TestAskFullBuffer(t *testing.T) {
	both(t, func(t *testing.T, nc net.Conn, c rw, peer *net.TCPConn) {
		req := make([]byte, 64<<20) // far past the socket's buffers
		for i := range req {
			req[i] = byte(i * 7)
		}
		got := make(chan []byte, 1)
		go func() {
			b := make([]byte, len(req))
			_, _ = io.ReadFull(peer, b)
			got <- b
			_, _ = peer.Write([]byte("done"))
		}()
		p := make([]byte, 4)
		w, m, err := ask(c, req, p)
		if err != nil || w != len(req) || string(p[:m]) != "done" {
			t.Fatalf("ask: wrote %d of %d, read %q, %v", w, len(req), p[:m], err)
		}
		if !bytes.Equal(<-got, req) {
			t.Error("the peer read other bytes than asked")
		}
	})
}

// An Ask whose deadline has passed writes nothing and fails as a write
// does, with the deadline's error; a reply that does not come in time
// fails it as a read, after the request was written whole.
func TestAskDeadlines(t *testing.T) {
	both(t, func(t *testing.T, nc net.Conn, c rw, peer *net.TCPConn) {
		nc.SetDeadline(time.Now().Add(-time.Second))
		w, _, err := ask(c, []byte("ping"), make([]byte, 4))
		checkOp(t, err, "write")
		if w != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("ask past its deadline: wrote %d, %v; want nothing written and the deadline's error", w, err)
		}
		nc.SetDeadline(time.Now().Add(50 * time.Millisecond))
		w, _, err = ask(c, []byte("ping"), make([]byte, 4))
		checkOp(t, err, "read")
		if w != 4 || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("ask without a reply: wrote %d, %v; want the request written and the deadline's error", w, err)
		}
		got := make([]byte, 4)
		if _, err := io.ReadFull(peer, got); err != nil || string(got) != "ping" {
			t.Fatalf("peer read %q, %v", got, err)
		}
	})
}

// A peer that ends the stream instead of replying: Ask returns io.EOF.
func TestAskEOF(t *testing.T) {
	both(t, func(t *testing.T, _ net.Conn, c rw, peer *net.TCPConn) {
		go func() {
			b := make([]byte, 4)
			_, _ = io.ReadFull(peer, b)
			peer.CloseWrite()
		}()
		w, n, err := ask(c, []byte("ping"), make([]byte, 4))
		if w != 4 || n != 0 || err != io.EOF {
			t.Fatalf("ask of a peer that ended: wrote %d, read %d, %v; want io.EOF", w, n, err)
		}
	})
}
