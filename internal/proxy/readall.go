package proxy

import (
	"io"

	"github.com/sidecache/sidecache/internal/bodyread"
)

// readAll reads an upstream answer's body, over limit read as limit+1
// bytes, in one allocation (internal/bodyread).
func readAll(r io.Reader, size, limit int64) ([]byte, error) { return bodyread.Limited(r, size, limit) }

// readAllTo is readAll into buf when it has room (bodyread.LimitedTo).
func readAllTo(buf []byte, r io.Reader, size, limit int64) ([]byte, error) {
	return bodyread.LimitedTo(buf, r, size, limit)
}
