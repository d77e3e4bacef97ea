//go:build linux && !race

package rawio

import (
	"syscall"
	"unsafe"
)

// sysRead and sysWrite are read(2) and write(2) by RawSyscall: no
// entersyscall (the package doc). p is not empty.
func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(n), e
}

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(n), e
}

// sysPeek is recvfrom(2) of p with MSG_PEEK|MSG_DONTWAIT: whether a byte,
// the end of the stream or a failure is there, reading nothing.
func sysPeek(fd uintptr, p []byte) syscall.Errno {
	_, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	return e
}
