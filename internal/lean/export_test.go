package lean

// RawCalls is c's raw read and write system calls (internal/rawio).
func RawCalls(c *Conn) (reads, writes int64) { return c.rw.Calls() }
