package proxy

import "sync/atomic"

// The memory a batch route's bulk calls and split lists may hold is
// bounded by cache.max_body_bytes, as any answer's is (SPEC: the sidecar
// never buffers more than that limit of one response):
//
//   - a bulk answer is one response: fetchBulk reads at most
//     max_body_bytes of it (its elements, split out, take as much again
//     until the answer's buffer is dropped), so a route's bulk calls hold
//     at most max_route_in_flight × 2 × max_body_bytes at once (128 MiB at
//     the defaults: 8 calls, 8 MiB). It read max_body_bytes × ids before
//     (up to 256 MiB a call): 100 misses of 2 MB records made one call
//     hold 200 MB, and a few Host spellings (groups) a gigabyte and more;
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

// heldBytes tracks the bytes of upstream answers a route holds at once in
// its bulk calls and split lists, the most it ever held, and the most one
// call or list held (for tests that check the bounds, and for a
// debugger): a few atomic operations per bulk call or list, not per id.
type heldBytes struct{ now, peak, largest atomic.Int64 }

// take adds n bytes held.
func (h *heldBytes) take(n int64) {
	raise(&h.peak, h.now.Add(n))
	raise(&h.largest, n)
}

// raise makes m at least v.
func raise(m *atomic.Int64, v int64) {
	for {
		p := m.Load()
		if v <= p || m.CompareAndSwap(p, v) {
			return
		}
	}
}

// release gives back n bytes taken.
func (h *heldBytes) release(n int64) { h.now.Add(-n) }
