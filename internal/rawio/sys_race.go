//go:build linux && race

package rawio

import "syscall"

// Under the race detector, sysRead and sysWrite are syscall.Read and
// syscall.Write, which tell the detector what the kernel reads and
// writes in p, and the happens-before edge between a write and a read on
// any descriptor that its tests may rely on; RawSyscall tells it nothing.
// The callbacks around them are the same.
func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return max(n, 0), errno(err)
}

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return max(n, 0), errno(err)
}

func sysPeek(fd uintptr, p []byte) syscall.Errno {
	_, _, err := syscall.Recvfrom(int(fd), p, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return errno(err)
}

// errno is err's Errno (what syscall's calls return), without errors.As,
// whose target would be allocated on every call.
func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return syscall.EIO
}
