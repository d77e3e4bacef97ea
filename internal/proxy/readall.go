package proxy

import (
	"io"

	"github.com/sidecache/sidecache/internal/bodyread"
)

// readAll reads an upstream answer's body, over limit read as limit+1
// bytes, in one allocation (internal/bodyread).
func readAll(r io.Reader, size, limit int64) ([]byte, error) { return bodyread.Limited(r, size, limit) }
