package cachekey

import (
	"net/url"
	"strings"
)

// Path returns the URL path (decoded, as net/url's URL.Path) of the request
// key was built for, read back from the grammar Build writes: the path
// starts at the first "/" after the method's SP (the host holds none) and
// ends at "?" or SP. It is not ok for a string Build cannot have written
// (no SP, no "/" path). A purge by key invalidates the key's path through
// its URI tag, so it reaches every variant and a fill in flight.
func Path(key string) (string, bool) {
	_, rest, ok := strings.Cut(key, " ")
	if !ok {
		return "", false
	}
	i := strings.IndexAny(rest, "/* ")
	if i < 0 || rest[i] != '/' {
		return "", false
	}
	p := rest[i:]
	if j := strings.IndexAny(p, "? "); j >= 0 {
		p = p[:j]
	}
	if dec, err := url.PathUnescape(p); err == nil {
		return dec, true
	}
	return p, true
}
