package rawio

import "net"

// TCPConn is a *net.TCPConn whose Read and Write are raw (Conn), for code
// that takes a net.Conn and looks for the TCP connection's other methods
// (http.Transport, and httputil.ReverseProxy's CloseWrite on an upgraded
// connection): those are the connection's own.
type TCPConn struct {
	*net.TCPConn
	rw *Conn
}

// TCP returns c with raw reads and writes when it is a *net.TCPConn and
// the system has them (New), c otherwise.
func TCP(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rw := New(tc)
	if !rw.Raw() {
		return c
	}
	return &TCPConn{TCPConn: tc, rw: rw}
}

// Read and Write are Conn's.
func (c *TCPConn) Read(p []byte) (int, error)  { return c.rw.Read(p) }
func (c *TCPConn) Write(p []byte) (int, error) { return c.rw.Write(p) }

// Calls is Conn's.
func (c *TCPConn) Calls() (reads, writes int64) { return c.rw.Calls() }
