package proxy

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strconv"

	"github.com/sidecache/sidecache/internal/bulk"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/httpcache"
)

// splitGzipMin is the smallest list a split route compresses: the default
// threshold of Express's compression() (1 KiB), below which gzip's framing
// costs more than it saves.
const splitGzipMin = 1024

// writeList answers a split list request with the reassembled array, as
// the app's own list endpoint would have (issue 24 item 2): gzip-coded for
// a client that accepts gzip once the list reaches splitGzipMin (Vary:
// Accept-Encoding either way, RFC 9110 §12.5.5), a strong ETag per coding
// over the bytes sent (RFC 9110 §8.8.3: a strong tag names one
// representation) and a 304 when the client's If-None-Match holds it
// (RFC 9110 §13.1.2). cc is the Cache-Control every element shares ("" if
// they differ); private overrides it.
func (x *exchange) writeList(body []byte, ct, cc string, private bool, s status) {
	hd := x.w.Header()
	hd.Set("Content-Type", ct)
	hd.Set("Vary", "Accept-Encoding")
	switch {
	case private:
		hd.Set("Cache-Control", "private")
	case cc != "":
		hd.Set("Cache-Control", cc)
	}
	gz := len(body) >= splitGzipMin &&
		cachekey.VariantCoding(x.r.Header["Accept-Encoding"], cachekey.Codings(0).With("gzip")) == "gzip"
	tag := bulk.ETag(body)
	if gz {
		tag = tag[:len(tag)-1] + `-gzip"`
	}
	hd.Set("Etag", tag)
	hd.Set("Cache-Status", s.String())
	if httpcache.NotModified(x.r, hd) {
		x.w.WriteHeader(http.StatusNotModified)
		return
	}
	if gz {
		body = x.h.gzip(body)
		hd.Set("Content-Encoding", "gzip")
	}
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	x.w.WriteHeader(http.StatusOK)
	if x.r.Method != http.MethodHead {
		_, _ = x.w.Write(body)
	}
}

// gzip compresses body at gzip's fastest level, with a writer from the
// handler's pool (a flate writer allocates its window once).
func (h *Handler) gzip(body []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(body) / 3)
	zw, _ := h.gzips.Get().(*gzip.Writer)
	if zw == nil {
		zw, _ = gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	} else {
		zw.Reset(&buf)
	}
	_, _ = zw.Write(body)
	_ = zw.Close()
	h.gzips.Put(zw)
	return buf.Bytes()
}
