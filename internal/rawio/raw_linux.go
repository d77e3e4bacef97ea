//go:build linux

package rawio

import (
	"io"
	"os"
	"syscall"
	"unsafe"
)

const supported = true

// readFD is RawConn.Read's callback: one read(2) that returns bytes, the
// end of the stream or a failure; false (wait for readiness) on EAGAIN.
func (c *Conn) readFD(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&c.rp[0])), uintptr(len(c.rp)))
		c.reads.Add(1)
		switch e {
		case 0:
			c.rn = int(n)
			return true
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.rerr = os.NewSyscallError("read", e)
			return true
		}
	}
}

// writeFD is RawConn.Write's callback: write(2) until the socket took all
// of wp or failed; on EAGAIN, false (wait for room) when the write waits,
// true (done) when it does not.
func (c *Conn) writeFD(fd uintptr) bool {
	for c.wn < len(c.wp) {
		m := min(len(c.wp)-c.wn, maxRW)
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&c.wp[c.wn])), uintptr(m))
		c.writes.Add(1)
		switch e {
		case 0:
			if n == 0 {
				// As net's own write: no progress and no error.
				c.werr = io.ErrUnexpectedEOF
				return true
			}
			c.wn += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return !c.wwait
		default:
			c.werr = os.NewSyscallError("write", e)
			return true
		}
	}
	return true
}
