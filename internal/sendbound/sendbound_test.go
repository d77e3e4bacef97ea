package sendbound_test

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/sendbound"
)

// pair is a TCP connection's two ends on loopback.
func pair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-acc
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// A peer that never reads: the write fails with a timeout once the
// socket buffers are full, instead of waiting for good.
func TestWriteToPeerThatNeverReadsFails(t *testing.T) {
	c, _ := pair(t)
	w := sendbound.Wrap(c, 200*time.Millisecond)
	done := make(chan error, 1)
	go func() {
		_, err := w.Write(make([]byte, 256<<20)) // far past any socket buffer
		done <- err
	}()
	select {
	case err := <-done:
		var te interface{ Timeout() bool }
		if !errors.As(err, &te) || !te.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) || !sendbound.Cut(err) {
			t.Fatalf("write ended with %v, want a timeout", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the write to a peer that never reads was still blocked after a minute")
	}
}

// A peer that reads slowly but steadily: a write far longer than d in
// whole (32 reads d/20 apart, of at most 256 KiB) is not cut while its
// chunks keep moving.
func TestSlowSteadyReaderIsNotCut(t *testing.T) {
	c, s := pair(t)
	const d = time.Second
	w := sendbound.Wrap(c, d)
	const total = 8 << 20
	read := make(chan int64, 1)
	go func() {
		var n int64
		buf := make([]byte, 256<<10)
		for n < total {
			m, err := s.Read(buf)
			n += int64(m)
			if err != nil {
				break
			}
			time.Sleep(d / 20)
		}
		read <- n
	}()
	if n, err := w.Write(make([]byte, total)); err != nil || n != total {
		t.Fatalf("wrote %d of %d: %v", n, total, err)
	}
	if n := <-read; n != total {
		t.Fatalf("read %d of %d", n, total)
	}
	_, _ = io.WriteString(w, "x") // an idle connection's next write re-arms
}
