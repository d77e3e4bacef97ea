package lean

import (
	"io"
	"net/http"
)

// FilterTrailers applies trailers to the trailers httputil.ReverseProxy
// will relay from resp, so that its path drops the fields WriteResponse
// and WriteTrailers drop: the names announced now, and the fields that
// came, once the body has been read to its end (the Transport fills
// resp.Trailer at its EOF, before ReverseProxy copies it). An upgraded
// connection's body is left as it is: ReverseProxy needs it to be the
// connection.
func FilterTrailers(resp *http.Response, trailers func(http.Header)) {
	if resp.StatusCode == http.StatusSwitchingProtocols || resp.Body == nil || resp.Body == http.NoBody {
		return
	}
	trailers(resp.Trailer)
	if resp.ContentLength < 0 { // only a chunked answer has trailers
		resp.Body = &trailerFilter{ReadCloser: resp.Body, resp: resp, f: trailers}
	}
}

type trailerFilter struct {
	io.ReadCloser
	resp *http.Response
	f    func(http.Header)
}

func (b *trailerFilter) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && len(b.resp.Trailer) > 0 {
		b.f(b.resp.Trailer)
	}
	return n, err
}
