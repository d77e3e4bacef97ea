package lean

import (
	"compress/gzip"
	"io"
	"net/http"
	"strings"

	"github.com/sidecache/sidecache/internal/httpcache"
)

// GzipLines returns rt, when it is an http.Transport that asks for gzip on
// its own (a request naming no coding and no Range: it adds
// Accept-Encoding: gzip and decodes the answer), with the answers it asked
// gzip for decoded when their Content-Encoding field lines together say
// gzip though the first does not: the Transport reads the first line
// alone (Header.Get), so `Content-Encoding: identity` then
// `Content-Encoding: gzip` reached a client that never asked for gzip
// still coded (RFC 9110 §5.3: the lines are one list; §12.5.3). Send's
// own decoding reads every line (out.go). Any other rt is returned as is.
func GzipLines(rt http.RoundTripper) http.RoundTripper {
	if t, ok := rt.(*http.Transport); !ok || t.DisableCompression {
		return rt
	}
	return gzipLines{rt}
}

type gzipLines struct{ rt http.RoundTripper }

func (g gzipLines) RoundTrip(r *http.Request) (*http.Response, error) {
	asked := r.Header.Get("Accept-Encoding") == "" && r.Header.Get("Range") == "" && r.Method != http.MethodHead
	resp, err := g.rt.RoundTrip(r)
	if err != nil || !asked || resp.Uncompressed || resp.Body == nil || resp.Body == http.NoBody ||
		len(resp.Header["Content-Encoding"]) < 2 || !strings.EqualFold(httpcache.ContentCoding(resp.Header), "gzip") {
		return resp, err
	}
	resp.Body = &lazyGzip{rc: resp.Body}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	resp.Uncompressed = true
	return resp, nil
}

// CloseIdleConnections closes rt's idle connections.
func (g gzipLines) CloseIdleConnections() {
	if c, ok := g.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// lazyGzip decodes rc, its decoder made on the first read (an error in the
// gzip header is that read's), as the Transport's gzipReader.
type lazyGzip struct {
	rc  io.ReadCloser
	zr  *gzip.Reader
	err error
}

func (g *lazyGzip) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if g.zr == nil {
		if g.zr, g.err = gzip.NewReader(g.rc); g.err != nil {
			return 0, g.err
		}
	}
	return g.zr.Read(p)
}

func (g *lazyGzip) Close() error { return g.rc.Close() }
