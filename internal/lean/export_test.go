package lean

// RawCalls is c's raw read and write system calls (internal/rawio).
func RawCalls(c *Conn) (reads, writes int64) { return c.rw.Calls() }

// Idle is the number of idle connections cl keeps.
func Idle(cl *Client) int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return len(cl.idle)
}

// IdleCalls is the raw read and write system calls of cl's idle
// connections, summed.
func IdleCalls(cl *Client) (reads, writes int64) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for _, c := range cl.idle {
		r, w := c.rw.Calls()
		reads, writes = reads+r, writes+w
	}
	return reads, writes
}
