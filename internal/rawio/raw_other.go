//go:build !linux

package rawio

// Elsewhere a Conn reads and writes through its net.Conn (New).
const supported = false

func (c *Conn) readFD(uintptr) bool  { return true }
func (c *Conn) writeFD(uintptr) bool { return true }
func (c *Conn) peekFD(uintptr) bool  { return true }
