//go:build unix

package edge

import (
	"net"
	"syscall"
)

// pending reports whether c's socket holds bytes not read yet (or its
// peer's end of stream): one recv(2) with MSG_PEEK|MSG_DONTWAIT on its
// descriptor, outside net's read lock (Control), so it does not wait
// behind net/http's read of the idle connection. false when c is no
// socket of net's.
func pending(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var b [1]byte
	var n int
	var rerr error
	if rc.Control(func(fd uintptr) {
		for {
			n, _, rerr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if rerr != syscall.EINTR {
				return
			}
		}
	}) != nil {
		return false
	}
	return rerr == nil && n > 0
}
