//go:build linux

package rawio

import (
	"io"
	"os"
	"syscall"
)

const supported = true

// readFD is RawConn.Read's callback: one read(2) that returns bytes, the
// end of the stream or a failure; false (wait for readiness) on EAGAIN.
func (c *Conn) readFD(fd uintptr) bool {
	for {
		n, e := sysRead(fd, c.rp)
		c.reads.Add(1)
		switch e {
		case 0:
			c.rn = n
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
		n, e := sysWrite(fd, c.wp[c.wn:c.wn+m])
		c.writes.Add(1)
		switch e {
		case 0:
			if n == 0 {
				// As net's own write: no progress and no error.
				c.werr = io.ErrUnexpectedEOF
				return true
			}
			c.wn += n
		case syscall.EINTR:
		case syscall.EAGAIN:
			if !c.wwait {
				return true
			}
			// About to wait for room: what the socket took since the
			// last wait is progress (Taken). Only a write that waits
			// gets here, so WriteNow pays nothing.
			c.taken.Add(int64(c.wn - c.wlast))
			c.wlast = c.wn
			return false
		default:
			c.werr = os.NewSyscallError("write", e)
			return true
		}
	}
	return true
}

// peekFD is Pending's callback: one peek at the next byte; never waits.
func (c *Conn) peekFD(fd uintptr) bool {
	var b [1]byte
	for {
		e := sysPeek(fd, b[:])
		c.reads.Add(1)
		if e != syscall.EINTR {
			c.pend = e != syscall.EAGAIN // a byte, the end (0 bytes), or a failure
			return true
		}
	}
}
