// Package bulkmem bounds and counts the memory a batch route's bulk calls
// and split lists hold. It is bounded by cache.max_body_bytes, as any
// answer's is (SPEC: the sidecar never buffers more than that limit of
// one response):
//
//   - a bulk answer is one response: the proxy reads at most
//     max_body_bytes of it (Read; its elements, split out, take as much
//     again until the answer's buffer is dropped), so a route's bulk calls
//     hold at most max_route_in_flight × 2 × max_body_bytes at once (128
//     MiB at the defaults: 8 calls, 8 MiB). It read max_body_bytes × ids
//     before (up to 256 MiB a call): 100 misses of 2 MB records made one
//     call hold 200 MB, and a few Host spellings (groups) a gigabyte and
//     more;
//   - a split list is one response too: the elements it holds for its
//     answer, and the answer assembled from them (and gzip-coded), are at
//     most max_body_bytes; a list whose elements are more passes through
//     to the upstream's list, streamed, as any answer over the bound does.
//
// A bulk answer over the bound fails no waiter for it: a shared call is
// retried once per client request (batch.ErrApart), so a one-id request
// gets its record from a call of its own, stored as any other; a record
// that alone is over the bound passes through, uncached (the per-ID
// request, streamed), as on any cached route; a list's own call over it
// passes the list through. Nothing cut short is ever split, stored or
// served. sidecache_batch_too_large_total counts both.
//
// A route's bulk answers are read into buffers it keeps (Reuse): each
// answer is split into copies of its elements and then dropped, so the
// next call reads into its buffer.
package bulkmem

import (
	"io"
	"sync"
	"sync/atomic"

	"github.com/sidecache/sidecache/internal/bodyread"
)

// MaxBuf is the largest buffer a route keeps to read its next bulk
// answer into.
const MaxBuf = 1 << 20

// Route is one route's bulk answer buffers and the bytes of upstream
// answers it holds at once in its bulk calls and split lists, the most it
// ever held, and the most one call or list held (for tests that check the
// bounds, and for a debugger): a few atomic operations per bulk call or
// list, not per id. The zero value is ready; safe for concurrent use.
type Route struct {
	bufs               sync.Pool // *[]byte
	now, peak, largest atomic.Int64
}

// Read reads a bulk answer's body r, of size bytes (-1: unknown), within
// limit (over limit it is read as limit+1 bytes: bodyread.LimitedTo),
// into a buffer of the route's; buf is that buffer, for Reuse.
func (m *Route) Read(r io.Reader, size, limit int64) (body []byte, buf *[]byte, err error) {
	buf, _ = m.bufs.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	body, err = bodyread.LimitedTo(*buf, r, size, limit)
	return body, buf, err
}

// Reuse keeps buf, which Read read body into, for the route's next bulk
// answer, unless body outgrew MaxBuf: once nothing holds body (its
// elements split out are copies, an error's text too).
func (m *Route) Reuse(buf *[]byte, body []byte) {
	if cap(body) <= MaxBuf {
		*buf = body[:0]
		m.bufs.Put(buf)
	}
}

// Take adds n bytes held.
func (m *Route) Take(n int64) {
	raise(&m.peak, m.now.Add(n))
	raise(&m.largest, n)
}

// Release gives back n bytes taken.
func (m *Route) Release(n int64) { m.now.Add(-n) }

// Peak is the most bytes the route held at once, and the most one bulk
// call or list held.
func (m *Route) Peak() (all, one int64) { return m.peak.Load(), m.largest.Load() }

// raise makes v at least n.
func raise(v *atomic.Int64, n int64) {
	for {
		p := v.Load()
		if n <= p || v.CompareAndSwap(p, n) {
			return
		}
	}
}
