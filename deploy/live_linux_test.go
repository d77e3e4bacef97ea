package deploy

import "syscall"

// liveProcAttr asks the kernel to kill the started sidecache when the test
// binary dies, so an interrupted run leaves no process behind.
func liveProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
