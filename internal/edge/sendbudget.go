package edge

// The bound on what waiting writes hold (server.max_pending_send_bytes;
// internal/sendbudget).
//
// Every byte the proxy listener sends a client goes through Conn.write:
// an answer from L1 or L2, a fill's, a batch element's, a split list's,
// a large body streamed through, a pass-through's, net/http's own. A
// write the socket takes at once costs nothing more than it did. One the
// socket cannot take whole waits (up to server.write_timeout) and holds
// its bytes meanwhile, the cached body itself for an answer from the
// cache; so before it waits it is counted in the process's Budget, and
// taken out when it returns. When the count goes over the budget, the
// writes held longest without progress are cut (Cut): their connections
// closed as at write_timeout, counted as ReasonSendBudget.

// Taken is sendbudget.Sender's: the bytes the socket took of this
// connection's writes that waited (rawio.Conn.Taken).
func (c *Conn) Taken() int64 { return c.io.Taken() }

// Cut is sendbudget.Sender's: it closes the connection, so that its
// waiting write fails at once and lets go of its bytes, and counts it
// (once, as a write cut at write_timeout is). The client sees its answer
// end before its Content-Length, never a different answer. Called from
// another connection's write.
func (c *Conn) Cut() {
	if c.cut.CompareAndSwap(false, true) && c.count != nil {
		c.count.EdgeRefused(ReasonSendBudget)
	}
	_ = c.closeSocket()
}
