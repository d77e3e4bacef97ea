// Package largebody hands an upstream answer too large to keep to the one
// client whose request fetched it. Only that client streams it — the part
// already read, then the rest — so one client request never costs two
// upstream fetches, and an answer that is private, carries that client's
// Set-Cookie or a coding only it accepts never reaches another; every other
// client of the flight passes through with its own fetch.
//
// It exists apart from the proxy because the hand-over is a small race of
// its own, between the client claiming the answer, the client leaving and
// nobody coming: exactly one of them must close the upstream's body, and
// none may leave it open; and the stream that follows keeps the
// pass-through paths' rules (hop-by-hop fields, trailers, flushing, an
// aborted body never passed off as whole). That reads and tests alone.
package largebody

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sidecache/sidecache/internal/bufpool"
	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/lean"
)

// Grace is how long an answer waits to be claimed before it is closed.
const Grace = 5 * time.Second

// Body is an upstream answer too large to keep, already partly read.
type Body struct {
	claimed atomic.Bool
	// Resp is the live answer; its body is the rest of it.
	Resp *http.Response
	// Prefix is what was read of the body before it turned out too large.
	Prefix []byte
	// Cancel ends the upstream call (its context).
	Cancel context.CancelFunc
}

// New returns the answer resp, of which prefix was read, whose call cancel
// ends. It is closed unclaimed at once when ctx (the fetching client's
// request) ends, since nobody else will stream it, and after Grace when
// nobody has claimed it.
func New(ctx context.Context, resp *http.Response, prefix []byte, cancel context.CancelFunc) *Body {
	l := &Body{Resp: resp, Prefix: prefix, Cancel: cancel}
	time.AfterFunc(Grace, l.drop)
	context.AfterFunc(ctx, l.drop)
	return l
}

// drop closes l if nobody has claimed it.
func (l *Body) drop() {
	if l.Claim() {
		l.Close()
	}
}

// Claim reports whether the caller is the first to claim l, and so the one
// to stream and Close it.
func (l *Body) Claim() bool { return l.claimed.CompareAndSwap(false, true) }

// Close closes the upstream's body and ends its call.
func (l *Body) Close() {
	l.Resp.Body.Close()
	l.Cancel()
}

// StreamOptions are the sidecar's parts of a streamed answer.
type StreamOptions struct {
	Strip    func(http.Header) // removes the tag headers; nil: none
	Via      []string          // the sidecar's Via field (read-only); nil: none
	Trailers func(http.Header) // the one trailer filter of every path
	Bufs     bufpool.Pool      // copy buffers
}

// Stream writes l, claimed by the caller, as the answer to r, with member
// as the sidecar's Cache-Status member, and closes it: the part already
// read, then the rest, with the status line, the header and every read
// flushed as they come whatever the answer's length (lean.StreamBody): an
// event stream or a long poll that outgrew max_body_bytes must not wait in
// net/http's write buffer, nor must the start of a large answer whose
// upstream stalls (the client would see nothing until the upstream
// timeout cut the connection). Its trailers follow, filtered as theirs are (lean.AnnounceTrailers,
// lean.WriteTrailers).
//
// The client leaving ends the upstream call at once, as on the other
// pass-through paths. A body the upstream broke off (or one the client
// stopped taking) is returned as an error, on which the caller must abort
// the client's connection: a chunked answer's last chunk, or a kept-alive
// connection after a short Content-Length, would let the client and any
// cache in front take a short body for the whole one (RFC 9112 §8).
func (l *Body) Stream(w http.ResponseWriter, r *http.Request, member string, o *StreamOptions) error {
	defer l.Close()
	stop := context.AfterFunc(r.Context(), l.Cancel)
	defer stop()
	resp := l.Resp
	dst := w.Header()
	for k, v := range resp.Header {
		dst[k] = v
	}
	httpcache.RemoveHopHeaders(dst)
	if o.Strip != nil {
		o.Strip(dst)
	}
	dst.Set("Cache-Status", httpcache.AppendCacheStatus(resp.Header.Get("Cache-Status"), member))
	httpcache.AddVia(dst, o.Via)
	if resp.ContentLength >= 0 {
		dst.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	// The trailers as the pass-through paths relay them: announced, then
	// sent after the body, filtered by the one filter.
	announced := lean.AnnounceTrailers(dst, resp, o.Trailers)
	w.WriteHeader(resp.StatusCode)
	if r.Method == http.MethodHead {
		return nil
	}
	// Committed to streaming: what is read is flushed as it comes.
	buf := o.Bufs.Take()
	err := lean.StreamBody(w, resp, l.Prefix, *buf)
	o.Bufs.Return(buf)
	if err == nil {
		lean.WriteTrailers(w, resp, announced, o.Trailers)
	}
	return err
}
