//go:build !linux

package rawio

import (
	"net"
	"testing"
)

// queued needs Linux's TIOCINQ; elsewhere a Conn is net.Conn's own (the
// package doc), so the test that waits on it has nothing of ours to test.
func queued(t *testing.T, _ *net.TCPConn) int {
	t.Skip("the receive queue's length is read with Linux's TIOCINQ")
	return 0
}
