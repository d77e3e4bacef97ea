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
	// takes bytes only as the peer reads them.
	_ = peer.SetReadDeadline(time.Now().Add(10 * time.Second)) // a failure guard
	buf := make([]byte, 1<<20)
	read := 0
	for c.Taken() == 0 {
		n, err := peer.Read(buf)
		if err != nil {
			select {
			case werr := <-done:
				t.Fatalf("the write ended (%v) with Taken 0", werr)
			default:
			}
			t.Fatalf("Taken stayed 0 while the peer read %d bytes: %v", read, err)
		}
		read += n
	}
	_ = a.SetWriteDeadline(time.Now())
	<-done
}
