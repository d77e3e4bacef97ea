//go:build unix

package late

import (
	"net"
	"sync"
	"syscall"
)

// Pending reports whether nc's receive buffer holds bytes, with a
// non-blocking MSG_PEEK through RawConn.Control, which (unlike RawConn.Read)
// does not check the deadline that has just passed. False when it cannot
// tell. The peek does not block: net makes every socket non-blocking
// (EAGAIN: nothing there).
func Pending(nc net.Conn) bool {
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

// dialWatch keeps a duplicate of each socket a dial opens, so that after
// the dial timed out it can tell whether the connection was established
// anyway: under CPU starvation the handshake completes (a local Redis
// answers a SYN at once) and the deadline passes before the dialing
// goroutine runs again. The duplicates cost a dup and a close per dial.
type dialWatch struct {
	mu  sync.Mutex
	fds []int
}

// control is the dialer's Control: it duplicates the new socket.
func (w *dialWatch) control(_, _ string, rc syscall.RawConn) error {
	return rc.Control(func(fd uintptr) {
		if d, err := syscall.Dup(int(fd)); err == nil {
			w.mu.Lock()
			w.fds = append(w.fds, d)
			w.mu.Unlock()
		}
	})
}

// established reports whether any socket the dial opened was connected,
// and closes the duplicates.
func (w *dialWatch) established() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	ok := false
	for _, d := range w.fds {
		if _, err := syscall.Getpeername(d); err == nil {
			ok = true
		}
		_ = syscall.Close(d)
	}
	w.fds = nil
	return ok
}
