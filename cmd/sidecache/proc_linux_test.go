package main

import "syscall"

// sysProcAttr asks the kernel to kill a started binary when the test binary
// dies, so an interrupted run leaves no sidecache or upstream behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
