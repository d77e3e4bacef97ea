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
func Limited(r io.Reader, size, limit int64) ([]byte, error) {
	if size < 0 || size > limit {
		return io.ReadAll(io.LimitReader(r, limit+1))
	}
	b := make([]byte, 0, size+1) // +1: the EOF is read without growing
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
		if len(b) == cap(b) { // longer than announced
			b = append(b, 0)[:len(b)]
		}
	}
}
