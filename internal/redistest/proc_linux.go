package redistest

import "syscall"

// sysProcAttr asks the kernel to kill redis-server when the test binary
// dies, so a crashed or interrupted test leaves no server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
