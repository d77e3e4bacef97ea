package rawio

import (
	"testing"
	"time"
)

// Taken counts what the socket took of a write that waited, each time it
// waits again: it grows as the peer reads, and a WriteNow, which never
// waits, adds nothing.
func TestTakenGrowsWithThePeersReads(t *testing.T) {
	a, peer := tcpPair(t)
	c := New(a)
	p := make([]byte, 64<<20) // far past both sockets' buffers
	if n, err := c.WriteNow(p); err != nil || n == 0 || n == len(p) {
		t.Fatalf("WriteNow to an empty socket: %d of %d, %v", n, len(p), err)
	}
	if got := c.Taken(); got != 0 {
		t.Fatalf("Taken after a WriteNow = %d, want 0: it never waited", got)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Write(p)
		done <- err
	}()
	// The socket is full (WriteNow filled it): the write waits, and
	// takes bytes only as the peer reads them. The peer reads 1 MiB, far
	// less than the 64 MiB the write has left, and stops: the write takes
	// what that freed and must wait again, which is when Taken counts it.
	// (A peer that went on reading could drain the socket as fast as the
	// write filled it, under a loaded scheduler, so that the write never
	// waited again and ended with Taken 0.)
	_ = peer.SetReadDeadline(time.Now().Add(10 * time.Second)) // a failure guard
	buf := make([]byte, 64<<10)
	read := 0
	for read < 1<<20 {
		n, err := peer.Read(buf)
		if err != nil {
			t.Fatalf("the peer's read after %d bytes: %v", read, err)
		}
		read += n
	}
	for deadline := time.Now().Add(10 * time.Second); c.Taken() == 0; time.Sleep(time.Millisecond) {
		select {
		case werr := <-done:
			t.Fatalf("the write ended (%v) with Taken 0, the peer having read %d of its 64 MiB", werr, read)
		default:
		}
		if time.Now().After(deadline) { // a failure guard, not a measurement
			t.Fatalf("Taken stayed 0 while the peer read %d bytes", read)
		}
	}
	if got := c.Taken(); got > int64(len(p)) {
		t.Errorf("Taken = %d, more than the write's %d bytes", got, len(p))
	}
	_ = a.SetWriteDeadline(time.Now())
	<-done
}
