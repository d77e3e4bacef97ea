//go:build !linux

package deploy

import "syscall"

func liveProcAttr() *syscall.SysProcAttr { return nil }
