// Package bodyread reads an upstream body whole, within a bound, into one
// buffer sized from its Content-Length.
//
// io.ReadAll starts at 512 bytes and grows: a 60 KB bulk answer cost it 8
// allocations and twice its size copied, on every batched call.
package bodyread

import "io"

// Limited is io.ReadAll(io.LimitReader(r, limit+1)) into one buffer sized
// from the answer's Content-Length (size; -1 when unknown), so a caller
// still sees an answer over limit as limit+1 bytes. A body longer or
// shorter than announced reads as io.ReadAll would read it.
func Limited(r io.Reader, size, limit int64) ([]byte, error) { return LimitedTo(nil, r, size, limit) }

// LimitedTo is Limited into buf's capacity when it has room for the
// answer, so that a caller done with each body before the next (a bulk
// answer, split into copies of its elements) can read them all into one
// buffer instead of a new one each: the garbage of a 20 KB answer per bulk
// call was a large part of what a batched miss allocated. The body is
// returned in a new buffer when buf is too small.
func LimitedTo(buf []byte, r io.Reader, size, limit int64) ([]byte, error) {
	var b []byte
	switch {
	case size >= 0 && size <= limit && int64(cap(buf)) > size:
		b = buf[:0]
	case size >= 0 && size <= limit:
		b = make([]byte, 0, size+1) // +1: the EOF is read without growing
	case cap(buf) > 0:
		b = buf[:0] // grown as the body comes, from buf's capacity
	default:
		return io.ReadAll(io.LimitReader(r, limit+1))
	}
	lr := io.LimitReader(r, limit+1)
	for {
		n, err := lr.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) { // longer than announced, or unknown
			b = append(b, 0)[:len(b)]
		}
	}
}
