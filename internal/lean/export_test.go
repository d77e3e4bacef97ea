package lean

// RawCalls is c's raw read and write system calls (internal/rawio).
func RawCalls(c *Conn) (reads, writes int64) { return c.rw.Calls() }

// Idle is the number of idle connections cl keeps.
func Idle(cl *Client) int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return len(cl.idle)
}
