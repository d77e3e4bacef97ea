package mget

import (
	"github.com/sidecache/sidecache/internal/cache/l2/late"
	"github.com/sidecache/sidecache/internal/rawio"
)

// send has the command b written: by the reply's first read (reply.Read:
// rawio's Ask, which saves the read that would find nothing yet), or, with
// a test's stall, at once, since the stall between the write and the read
// (late.BeforeRead) must run outside the socket's read call.
func (c *conn) send(b []byte) error {
	if c.br.Buffered() != 0 { // bytes no command asked for: not a reply to this one
		return errProto
	}
	if c.stall == nil {
		c.src.req, c.src.werr = b, nil
		return nil
	}
	c.stall(late.BeforeWrite, c.nc)
	if n, err := c.rw.Write(b); err != nil {
		return late.WriteFailed(n, err)
	}
	c.stall(late.BeforeRead, c.nc)
	return nil
}

// reply is what a conn's bufio.Reader reads from: the socket, and for the
// first read after send, rawio's Ask of the command.
type reply struct {
	rw    *rawio.Conn
	req   []byte // the command the next read writes first; nil: none
	wrote int    // of the last Ask's command
	werr  error  // the last Ask's write failure (then it read nothing)
}

func (r *reply) Read(p []byte) (int, error) {
	if r.req == nil {
		return r.rw.Read(p)
	}
	req := r.req
	r.req = nil
	w, n, err := r.rw.Ask(req, p)
	if r.wrote = w; w < len(req) {
		r.werr = err
		return 0, err
	}
	return n, err
}
