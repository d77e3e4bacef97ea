package rawio

import (
	"net"
	"runtime"
	"testing"
	"time"
)

// aLongTimeAgo is the deadline net/http's abortPendingRead sets.
var aLongTimeAgo = time.Unix(1, 0)

// BenchmarkReadPastDeadline is net/http's background read of a request
// whose handler never parked (an L1 hit): its goroutine first runs once
// abortPendingRead has moved the read deadline into the past, and its
// read fails at once, without a system call.
// Run: go test -run - -bench 'ReadPast|ReadAborted' -benchmem -cpu 1 ./internal/rawio
func BenchmarkReadPastDeadline(b *testing.B) {
	benchBoth(b, func(b *testing.B, nc net.Conn, c rw) {
		nc.SetReadDeadline(aLongTimeAgo)
		p := make([]byte, 1)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Read(p); err == nil {
				b.Fatal("read past the deadline succeeded")
			}
		}
	})
}

// BenchmarkReadAborted is the same read when the handler parked (a
// batched miss): the read finds no byte (EAGAIN), waits in the poller,
// and abortPendingRead's deadline ends the wait.
func BenchmarkReadAborted(b *testing.B) {
	benchBoth(b, func(b *testing.B, nc net.Conn, c rw) {
		p := make([]byte, 1)
		done := make(chan error)
		b.ReportAllocs()
		for b.Loop() {
			nc.SetReadDeadline(time.Time{})
			go func() {
				_, err := c.Read(p)
				done <- err
			}()
			runtime.Gosched() // with -cpu 1, the reader runs now and waits
			nc.SetReadDeadline(aLongTimeAgo)
			if err := <-done; err == nil {
				b.Fatal("aborted read succeeded")
			}
		}
	})
}

func benchBoth(b *testing.B, f func(b *testing.B, nc net.Conn, c rw)) {
	b.Run("net", func(b *testing.B) {
		a, _ := tcpPairB(b)
		f(b, a, a)
	})
	b.Run("raw", func(b *testing.B) {
		a, _ := tcpPairB(b)
		f(b, a, New(a))
	})
}

func tcpPairB(b *testing.B) (a, peer *net.TCPConn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	d, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close(); s.Close() })
	return s.(*net.TCPConn), d.(*net.TCPConn)
}
