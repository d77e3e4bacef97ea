//go:build unix

package l2

import (
	"net"
	"syscall"
)

// pending reports whether nc's receive buffer holds bytes, with a
// non-blocking MSG_PEEK through RawConn.Control, which (unlike RawConn.Read)
// does not check the deadline that has just passed. False when it cannot
// tell. The peek does not block: net makes every socket non-blocking
// (EAGAIN: nothing there).
func pending(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var (
		b [1]byte
		n int
		e error
	)
	if err := rc.Control(func(fd uintptr) {
		n, _, e = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK)
	}); err != nil {
		return false
	}
	return e == nil && n > 0
}
