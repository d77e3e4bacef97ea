// Package uptransport is the http.Transport the proxy calls its upstream
// with where internal/lean's loop does not take the call (ReverseProxy's
// pass-through of anything but a bodiless read, a write, an upgrade; the
// cached fill's and the bulk call's on an https upstream or under
// tracing), and the wrappers every call through it passes, in their order.
//
// It exists apart from the proxy because the order is the rule: the answer
// checks innermost, so every path's answers pass them and a resent call is
// checked too; the between-bytes bound outermost, so a resent call's body
// is bounded too. That reads and tests alone, on a real socket.
package uptransport

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/sidecache/sidecache/internal/idlebody"
	"github.com/sidecache/sidecache/internal/lean"
	"github.com/sidecache/sidecache/internal/rawio"
	"github.com/sidecache/sidecache/internal/resend"
	"github.com/sidecache/sidecache/internal/sendbound"
	"github.com/sidecache/sidecache/internal/upframe"
)

// New is a keep-alive pool sized for one upstream on loopback. The
// response-header timeout makes a hung upstream answer 504 on pass-through
// (a body that stalls is cut by Wrap's idlebody, around it); maxHeader
// bounds an answer's header bytes (0: the Transport's 10 MiB).
func New(timeout time.Duration, idlePerHost int, maxHeader int64) *http.Transport {
	if idlePerHost <= 0 {
		idlePerHost = 256
	}
	d := &net.Dialer{Timeout: min(timeout, 5*time.Second), KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy: nil, // a sidecar talks to its own pod, never through a proxy
		// The connections' reads and writes are raw (internal/rawio):
		// ReverseProxy's upstream sockets, and the fill's and the bulk
		// call's where they take the Transport, enter no syscall.Syscall
		// either.
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// Each answer's header sections are scanned for
			// Content-Length beside Transfer-Encoding, which the
			// Transport drops without a word (upframe.Check).
			// A write the upstream takes no byte of for timeout fails
			// (internal/sendbound): NGINX's proxy_send_timeout.
			return upframe.Wrap(sendbound.Wrap(rawio.TCP(c), timeout)), nil
		},
		MaxIdleConns:           idlePerHost * 2,
		MaxIdleConnsPerHost:    idlePerHost,
		IdleConnTimeout:        90 * time.Second,
		ResponseHeaderTimeout:  timeout,
		MaxResponseHeaderBytes: maxHeader,
		// No upstream request carries Expect (httpcache.IsExpect): this
		// bounds only a RoundTripper's caller that adds one itself.
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     false,
	}
}

// Wrap returns rt (New's, or one the operator's wiring supplied) with the
// rules every call through it keeps, o bounding its bodies and tunnels.
func Wrap(rt http.RoundTripper, o idlebody.Options) http.RoundTripper {
	// One resend after a reused connection closed unanswered, never one
	// per idle connection (internal/resend); the lean loop has the same
	// bound of its own.
	// Innermost, so every path's answers pass it: an answer framed both
	// ways, or a 304 to a request with no condition, is a failure (502),
	// never stored or relayed (internal/upframe).
	// The gzip the Transport asks for on its own is decoded whatever
	// the lines of its Content-Encoding (lean.GzipLines): innermost, on
	// the Transport itself.
	rt = resend.Once(upframe.Check(lean.GzipLines(rt)))
	// A tunnel's writes are tunnel_idle_timeout's, not upstream.timeout's.
	rt = sendbound.Switched(rt)
	// The trailers Connection names are hop-by-hop: dropped before
	// ReverseProxy (or the fill) strips Connection from the header.
	rt = lean.HopTrailers(rt)
	// Each body read waits at most o.Body for its bytes
	// (internal/idlebody), outermost, so a resent call's body is bounded
	// too; a tunnel, o.Tunnel without a byte either way.
	return idlebody.Wrap(rt, o)
}
