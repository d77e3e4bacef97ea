// Package entrywrite writes a cache entry — a hit, a stale copy, or the
// answer a flight fetched — as the answer to one client's request: the
// stored header, the sidecar's Via, Age when it came from the cache (RFC
// 9111 §5.1), the Cache-Status member, Content-Length, and a 304 instead
// when the client's conditional matches a stored 200 (RFC 9110 §13.2.2).
//
// It exists apart from the proxy because it is the whole of an L1 hit's
// work after the lookup, held to one allocation per answer (the values it
// sets share one backing array), and that reads and tests alone, on an
// entry and a request.
package entrywrite

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cachestatus"
	"github.com/sidecache/sidecache/internal/httpcache"
)

// Options are the sidecar's own parts of every answer written from an
// entry.
type Options struct {
	Via []string         // the sidecar's Via field (read-only); nil: none
	Now func() time.Time // the clock Age is counted by
}

// notModifiedHeaders are the fields a 304 carries over from the stored 200
// (RFC 9110 §15.4.5).
var notModifiedHeaders = [...]string{"Cache-Control", "Content-Location", "Date", "Etag", "Expires", "Last-Modified", "Vary"}

// Write answers r from e with st as its Cache-Status member; fromCache:
// e was stored (Age and ttl are reported), not fetched for r.
//
// The values it sets (Age, Cache-Status, Content-Length) share one
// backing array, each a slice of capacity 1, so that one more value added
// to any of them is copied elsewhere: one allocation per response, not
// one per header.
func Write(w http.ResponseWriter, r *http.Request, e *cache.Entry, st cachestatus.Member, fromCache bool, o *Options) {
	dst := w.Header()
	vals := make([]string, 3)
	if e.Status == http.StatusOK && httpcache.NotModifiedTag(r, e.ETag(), e.Header) {
		for _, k := range notModifiedHeaders {
			if v, ok := e.Header[k]; ok {
				dst[k] = v
			}
		}
		if v := e.ETagField(); v != nil {
			dst["Etag"] = v
		}
		setCacheHeaders(dst, e, st, fromCache, vals, o)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	for k, v := range e.Header {
		dst[k] = v
	}
	if v := e.ETagField(); v != nil {
		dst["Etag"] = v // the entry's own, outside its shared header (cache.Entry.SetETag)
	}
	setCacheHeaders(dst, e, st, fromCache, vals, o)
	if e.Status != http.StatusNoContent && e.Status != http.StatusNotModified {
		vals[2] = strconv.Itoa(len(e.Body))
		dst["Content-Length"] = vals[2:3:3]
	}
	w.WriteHeader(e.Status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(e.Body)
	}
}

// setCacheHeaders sets Via, Age and Cache-Status; vals holds the values,
// Age's in vals[0] and Cache-Status's in vals[1] (Write).
func setCacheHeaders(dst http.Header, e *cache.Entry, st cachestatus.Member, fromCache bool, vals []string, o *Options) {
	httpcache.AddVia(dst, o.Via) // after the stored Via, never into it (AddVia)
	// A fetched answer that arrived with an age keeps it (RFC 9111 §5.1:
	// a cache passes the age of the caches before it on, plus its own);
	// under a second is only Date's rounding, not worth an Age: 0.
	if fromCache || e.InitialAge >= time.Second {
		vals[0] = strconv.FormatInt(int64(e.Age(o.Now())/time.Second), 10)
		dst["Age"] = vals[0:1:1]
	}
	vals[1] = httpcache.AppendCacheStatus(e.Header.Get("Cache-Status"), st.String())
	dst["Cache-Status"] = vals[1:2:2]
}
