//go:build !unix

package late

import (
	"net"
	"syscall"
)

// Pending cannot tell elsewhere: a read timeout counts against Redis.
func Pending(net.Conn) bool { return false }

// dialWatch cannot tell elsewhere: a dial timeout counts against Redis.
type dialWatch struct{}

func (*dialWatch) control(_, _ string, _ syscall.RawConn) error { return nil }
func (*dialWatch) established() bool                            { return false }
