package rawio

import (
	"net"
	"syscall"
	"testing"
	"unsafe"
)

// queued is how many bytes wait unread in c's receive queue (TIOCINQ).
func queued(t *testing.T, c *net.TCPConn) int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int32
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	}); err != nil {
		t.Fatal(err)
	}
	if errno != 0 {
		t.Fatalf("TIOCINQ: %v", errno)
	}
	return int(n)
}
