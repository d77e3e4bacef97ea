// Package bufpool recycles 32 KiB copy buffers: without it every
// pass-through response allocates one. A Pool is an httputil.BufferPool
// (Get, Put: Put allocates the slice header it keeps), and hands out the
// kept pointer itself to copies of the caller's own (Take, Return), which
// allocate nothing.
package bufpool

import "sync"

// Size is the length of every buffer, io.Copy's own.
const Size = 32 << 10

// Pool is a pool of Size-byte buffers. Copies share the one pool.
type Pool struct{ p *sync.Pool }

// New makes an empty Pool.
func New() Pool {
	return Pool{&sync.Pool{New: func() any { b := make([]byte, Size); return &b }}}
}

// Get is httputil.BufferPool's.
func (bp Pool) Get() []byte { return *bp.p.Get().(*[]byte) }

// Put is httputil.BufferPool's.
func (bp Pool) Put(b []byte) { bp.p.Put(&b) }

// Take is a buffer for the caller's own copy, to Return after it.
func (bp Pool) Take() *[]byte { return bp.p.Get().(*[]byte) }

// Return gives back a buffer Take gave.
func (bp Pool) Return(b *[]byte) { bp.p.Put(b) }
