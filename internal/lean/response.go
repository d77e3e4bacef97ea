package lean

import (
	"io"
	"net/http"
	"strings"
)

// WriteResponse writes resp, as RoundTrip returned it and the caller then
// edited its header, to w as ReverseProxy does: the header, with the
// trailers the upstream announced announced again (RFC 9110 §6.5), the
// status, the body, then the trailers. It reads the body to its end with
// buf, and returns the first error reading it or writing to w, after which
// the connection must be closed, not put back.
//
// The body is copied by Read and Write rather than io.Copy: the
// ResponseWriter's ReadFrom would send the header in a write of its own,
// where Write lets a small answer leave in one. A body of unknown length
// or an event stream is flushed after every read, as ReverseProxy does, so
// a stream reaches the client as it comes; any other is flushed before a
// read that must wait on the upstream, src having nothing of it at hand
// (CopyBody).
//
// trailers (nil: none) removes, from the announced names and again from
// the trailers that came, the fields the client must not get as trailers
// (RFC 9110 §6.5.1), as the caller removes them from the header.
func WriteResponse(w http.ResponseWriter, resp *http.Response, src Pending, buf []byte, trailers func(http.Header)) error {
	dst := w.Header()
	for k, vs := range resp.Header {
		dst[k] = vs
	}
	announced := AnnounceTrailers(dst, resp, trailers)
	w.WriteHeader(resp.StatusCode)
	if err := CopyBody(w, resp, src, nil, buf); err != nil {
		return err
	}
	WriteTrailers(w, resp, announced, trailers)
	return nil
}

// AnnounceTrailers removes with trailers (nil: none) the names resp's
// Trailer field announced that may not be trailers (RFC 9110 §6.5.1), and
// announces the rest in dst's Trailer field, before the header is written:
// net/http sends a trailer it was told of then as it is, and any other
// only under http.TrailerPrefix. It returns how many it announced, for
// WriteTrailers.
func AnnounceTrailers(dst http.Header, resp *http.Response, trailers func(http.Header)) int {
	if len(resp.Trailer) > 0 && trailers != nil {
		trailers(resp.Trailer)
	}
	announced := len(resp.Trailer)
	if announced > 0 {
		names := make([]string, 0, announced)
		for k := range resp.Trailer {
			names = append(names, k)
		}
		dst.Add("Trailer", strings.Join(names, ", "))
	}
	return announced
}

// WriteTrailers hands w the trailers that came with resp's body, read to
// its end, filtered again by trailers (nil: none) since the upstream may
// send fields it did not announce; announced is AnnounceTrailers' count.
// Every path that relays an upstream's body ends with it, so a field
// dropped on one is dropped on all.
func WriteTrailers(w http.ResponseWriter, resp *http.Response, announced int, trailers func(http.Header)) {
	if len(resp.Trailer) == 0 {
		return
	}
	if trailers != nil {
		trailers(resp.Trailer) // those that came unannounced too
	}
	if len(resp.Trailer) == 0 {
		return
	}
	dst := w.Header()
	_ = http.NewResponseController(w).Flush() // chunked, so trailers can follow
	if len(resp.Trailer) == announced {
		for k, vs := range resp.Trailer {
			dst[k] = vs
		}
		return
	}
	// Trailers the header did not announce can only be sent under the
	// TrailerPrefix.
	for k, vs := range resp.Trailer {
		for _, v := range vs {
			dst.Add(http.TrailerPrefix+k, v)
		}
	}
}

// Pending is what an answer's body is read from, as far as a copy needs
// to know: Buffered is the count of its bytes read from the upstream and
// not yet handed out, so that 0 means the body's next read waits on the
// upstream. *Conn is one.
type Pending interface{ Buffered() int }

// CopyBody writes prefix, the part of resp's body a caller has already
// read (nil: none), then the rest of resp.Body, to w, whose header has been
// written. An answer of unknown length or an event stream is flushed after
// every read, as httputil.ReverseProxy does (its flushInterval is -1 for
// them): a long poll or an event stream reaches the client as it comes,
// not as net/http's write buffer fills. An answer with a Content-Length is
// flushed only before a read that must wait on the upstream (src has none
// of its bytes at hand; nil src: every read may wait): what came — the
// status line and header, the bytes read — is the client's while the
// upstream is slow or stalls, as with NGINX's proxy_buffering off and
// Varnish's streaming, never held in net/http's write buffer until the
// upstream timeout cuts the connection with nothing sent. An answer that
// came whole with its header, the common small one, is never waited for,
// so it still leaves in one write; a flush per read of a body at hand
// would cost a syscall each. It returns the first error reading the body
// or writing to w.
func CopyBody(w http.ResponseWriter, resp *http.Response, src Pending, prefix, buf []byte) error {
	if resp.ContentLength == -1 || isEventStream(resp.Header) {
		return copyBody(w, http.NewResponseController(w), resp, nil, prefix, buf)
	}
	return copyBody(w, nil, resp, src, prefix, buf)
}

// StreamBody is CopyBody for an answer the sidecar has decided to stream
// whatever its length (one over max_body_bytes, internal/largebody): the
// status line and header are flushed before the first read of the body,
// and every read after it, so that an upstream that stalls mid-body leaves
// the client holding what it sent, as NGINX with proxy_buffering off and
// Varnish's streaming do — not an empty connection until the upstream
// timeout cuts it. The answer is over max_body_bytes, so the flush per
// read costs one syscall per buffer of a large body: noise.
func StreamBody(w http.ResponseWriter, resp *http.Response, prefix, buf []byte) error {
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	return copyBody(w, rc, resp, nil, prefix, buf)
}

// copyBody writes prefix then the rest of resp.Body to w, flushing after
// each write when rc is not nil, and otherwise before each read that src
// (nil: any) says must wait on the upstream (CopyBody).
func copyBody(w http.ResponseWriter, rc *http.ResponseController, resp *http.Response, src Pending, prefix, buf []byte) error {
	if len(prefix) > 0 {
		if _, err := w.Write(prefix); err != nil {
			return err
		}
		if rc != nil {
			_ = rc.Flush()
		}
	}
	if resp.Body == http.NoBody {
		return nil
	}
	var waits *http.ResponseController // made at the first wait: a body at hand makes none
	copied := int64(len(prefix))
	for {
		if rc == nil && copied < resp.ContentLength && (src == nil || src.Buffered() == 0) {
			// More is to come and the read may wait for it: what was
			// written goes first. A flush with nothing new written
			// writes nothing; a body read to its length is sent as the
			// handler returns, as before.
			if waits == nil {
				waits = http.NewResponseController(w)
			}
			_ = waits.Flush()
		}
		n, rerr := resp.Body.Read(buf)
		copied += int64(n)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return err
			}
			if rc != nil {
				_ = rc.Flush()
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

func isEventStream(h http.Header) bool {
	ct, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	return strings.EqualFold(strings.TrimSpace(ct), "text/event-stream")
}
