//go:build !unix

package l2

import "net"

// pending cannot tell elsewhere: a read timeout counts against Redis.
func pending(net.Conn) bool { return false }
