// Package lean is a reverse proxy's round trip to one plain-HTTP upstream,
// made on the caller's goroutine: write the request on an idle keep-alive
// connection, read the answer's header, and leave the body to the caller,
// who puts the connection back once it has read it to its end.
//
// httputil.ReverseProxy over http.Transport does the same on three
// goroutines (the handler, the connection's writeLoop and readLoop, with
// two channel hand-offs and their futex wake-ups per request) after cloning
// the request. On 2 cores at 3,000 req/s that hand-off and the clone were
// most of what a pass-through cost beyond a cache hit (bench/README.md), so
// the proxy sends its common pass-through this way: a GET, HEAD, OPTIONS
// or TRACE without a body and without Upgrade (Client.Takes).
//
// It keeps what ReverseProxy does to a request and an answer: hop-by-hop
// fields and the fields Connection names dropped (RFC 9110 §7.6.1), Te:
// trailers kept, Forwarded and X-Forwarded-For/Host/Proto replaced from the
// client's connection, the upstream's Host (request.go); 1xx answers handed
// to the caller as they come (RFC 9110 §15.2), trailers announced and
// relayed (RFC 9110 §6.5), streams of unknown length flushed as they come,
// and an answer of known length before a read that waits on the upstream
// (response.go). Everything else (bodies, upgrades, https) is for
// ReverseProxy.
//
// Only replayable requests take it, because it keeps no reader on an idle
// connection: an upstream that closed one is noticed on reuse, and the
// request is sent again on a new connection, as http.Transport does for
// replayable requests (RFC 9110 §9.2.2). A connection is reused only when
// nothing but the next answer can be read on it: bytes an upstream sent
// past an answer, read as the next one, would hand one client's response to
// another (a response desync), so such a connection is closed (conn.go).
//
// The cached path's own calls, the fill's GET and the bulk call, which the
// proxy builds whole for http.Transport, take the same pool by Send
// (out.go): written and answered as the Transport would, on the caller's
// goroutine (the bulk call's readLoop and writeLoop were ≈ 3.3 µs of a
// batched miss's CPU).
//
// It knows nothing of caching, metrics or the client's connection beyond
// the request: the proxy wraps it with those (internal/proxy/passloop.go).
package lean

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"time"

	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/rawio"
)

// Client sends requests to one upstream over a pool of keep-alive
// connections. It is safe for concurrent use.
type Client struct {
	addr    string // host:port
	host    string // the Host field (the upstream's, as ReverseProxy's SetURL)
	base    *url.URL
	timeout time.Duration // response-header timeout, and the bound between body bytes
	maxHdr  int64         // bytes of an answer's header sections, 1xx included
	dialer  net.Dialer
	max     int // idle connections kept
	// plainHost: host is written as it is by http.Request.write (no
	// punycode, zone or invalid byte to rework): Send may take requests.
	plainHost bool
	gzips     sync.Pool // *gzip.Reader for Send's gzip answers (out.go)

	mu     sync.Mutex
	idle   []*Conn
	closed bool
}

// idleTimeout drops a connection idle this long (as http.Transport's
// IdleConnTimeout), rather than writing to one the upstream likely closed.
const idleTimeout = 90 * time.Second

// DefaultMaxHeaderBytes bounds an answer's header sections when New is
// given no bound: http.Transport's default MaxResponseHeaderBytes.
const DefaultMaxHeaderBytes = 10 << 20

// New returns a client for upstream, or nil when upstream is not plain
// HTTP (https, or with user info: ReverseProxy's transport handles those).
// timeout bounds the wait for an answer's header, a dial, and each wait for
// a body's next bytes (Conn.armBody: not the whole body); maxIdle is the
// number of idle connections kept (256 when <= 0); maxHeader bounds the
// bytes of one answer's header sections, its 1xx answers' included, as
// http.Transport's MaxResponseHeaderBytes does (DefaultMaxHeaderBytes when
// <= 0).
func New(upstream *url.URL, timeout time.Duration, maxIdle int, maxHeader int64) *Client {
	if upstream.Scheme != "http" || upstream.User != nil {
		return nil
	}
	addr := upstream.Host
	if upstream.Port() == "" {
		addr = net.JoinHostPort(upstream.Hostname(), "80")
	}
	if maxIdle <= 0 {
		maxIdle = 256
	}
	if maxHeader <= 0 {
		maxHeader = DefaultMaxHeaderBytes
	}
	return &Client{
		addr: addr, host: upstream.Host, base: upstream, timeout: timeout, max: maxIdle, maxHdr: maxHeader,
		dialer:    net.Dialer{Timeout: min(timeout, 5*time.Second), KeepAlive: 30 * time.Second},
		plainHost: plainHost(upstream.Host),
	}
}

// Takes reports whether r may go this way: a replayable request (see the
// package doc) without a body or an upgrade, which http.Transport
// handles. An Expect it may carry is not sent (httpcache.IsExpect): with
// no body there is nothing to wait for. A nil Client takes nothing.
func (cl *Client) Takes(r *http.Request) bool {
	if cl == nil || r.ContentLength != 0 || (r.Body != nil && r.Body != http.NoBody) {
		return false
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
	default:
		return false
	}
	_, upgrade := r.Header["Upgrade"]
	return !upgrade && len(r.TransferEncoding) == 0 && r.RequestURI != "*"
}

// RoundTrip sends r upstream (request.go) and reads the answer's header.
// Each 1xx answer but 101 is passed to on1xx (which may be nil; it may keep
// or change h) before the final one. The response's hop-by-hop fields are
// removed, from its trailers too (DropConnectionTrailers), and its body
// must be read to its end, then c handed to Put, or c closed.
//
// A reused connection the upstream had closed fails before any answer: r
// is sent once more on a new connection (replayable: see the package doc).
// r must be one Takes takes. When ctx ends while the header is awaited, the
// connection is closed and ctx's error returned.
func (cl *Client) RoundTrip(ctx context.Context, r *http.Request, on1xx func(code int, h http.Header)) (resp *http.Response, c *Conn, err error) {
	for attempt := 0; attempt < 2; attempt++ {
		var reused bool
		now := time.Now()
		if c, reused, err = cl.get(ctx, now); err != nil {
			break
		}
		if !reused {
			now = time.Now() // after the dial
		}
		if resp, err = cl.roundTrip(ctx, c, r, on1xx, now); err == nil {
			DropConnectionTrailers(resp) // before Connection goes
			httpcache.RemoveHopHeaders(resp.Header)
			return resp, c, nil
		}
		c.Close()
		if !reused || !retryable(err) || c.interim || ctx.Err() != nil {
			break
		}
	}
	return nil, nil, fmt.Errorf("lean: %w", err)
}

// retryable: a reused connection the upstream had closed.
func retryable(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// await arms c for reading an answer's header sections, after a request
// was written on it at now. The response-header timeout, and the client
// leaving, both end the wait by a deadline in the past. The watch on ctx
// stays on while the body is read (Conn.stop): a client that leaves
// mid-body ends the upstream request too, as ReverseProxy's does. One
// bound covers every header section of the answer, as http.Transport
// without a 1xx hook: a flood of 1xx cannot read more than one header.
func (cl *Client) await(ctx context.Context, c *Conn, now time.Time) {
	c.deadline = now.Add(cl.timeout)
	_ = c.c.SetReadDeadline(c.deadline)
	c.stop = context.AfterFunc(ctx, c.expire)
	c.lr.n, c.lr.idle = cl.maxHdr, 0
}

// roundTrip writes r on c and reads the answer's header, by now plus the
// response-header timeout (now: when c was taken, a clock read spared).
func (cl *Client) roundTrip(ctx context.Context, c *Conn, r *http.Request, on1xx func(int, http.Header), now time.Time) (*http.Response, error) {
	c.begin()
	if err := writeRequest(c.bw, r, cl.base, cl.host); err != nil {
		return nil, err
	}
	cl.await(ctx, c, now)
	for {
		resp, err := http.ReadResponse(c.br, r)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		switch {
		case resp.StatusCode < 100:
			// Three digits, but no status (RFC 9110 §15): the answer
			// cannot be relayed (a ResponseWriter panics on it).
			return nil, fmt.Errorf("upstream status %d out of range", resp.StatusCode)
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errors.New("upstream switched protocols on a request that did not ask to upgrade")
		case resp.StatusCode < 200:
			c.interim = true
			if on1xx != nil {
				on1xx(resp.StatusCode, resp.Header)
			}
			continue
		}
		if err := c.check(r, resp); err != nil {
			return nil, err
		}
		c.lr.n = math.MaxInt64 // the body is bounded by its framing, not here
		if resp.ContentLength < 0 || resp.ContentLength > int64(c.br.Buffered()) {
			// A long download that has started is not cut while its
			// bytes come; one that stops coming is, after the timeout
			// (armBody). A body already read whole keeps the header's
			// deadline (see get).
			c.armBody(time.Now(), cl.timeout)
			if ctx.Err() != nil {
				// The client left before the deadline was cleared: the
				// watch has fired, or is about to set it again.
				return nil, ctx.Err()
			}
		}
		c.keep = !resp.Close
		resp.Request = nil
		return resp, nil
	}
}

// Put returns c to the pool once its answer's body has been read to its
// end. A connection the answer asked to close, with bytes past the answer,
// or beyond the pool's size, is closed instead.
func (cl *Client) Put(c *Conn) {
	if !c.unwatch() || !c.keep || c.br.Buffered() > 0 {
		// The client left as the body ended (the read deadline may be
		// set in the past any moment), or the answer asked to close, or
		// bytes past it: never read as the next answer.
		c.Close()
		return
	}
	c.used = time.Now()
	cl.mu.Lock()
	if !cl.closed && len(cl.idle) < cl.max {
		cl.idle = append(cl.idle, c)
		c = nil
	}
	cl.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// CloseIdle closes the idle connections and keeps none from now on (the
// upstream was replaced by a reload). A nil Client has none.
func (cl *Client) CloseIdle() {
	if cl == nil {
		return
	}
	cl.mu.Lock()
	idle := cl.idle
	cl.idle, cl.closed = nil, true
	cl.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
}

// get takes the most recently used idle connection that is still clean, or
// dials one; reused tells which. now is the time it is asked at.
func (cl *Client) get(ctx context.Context, now time.Time) (c *Conn, reused bool, err error) {
	for {
		cl.mu.Lock()
		n := len(cl.idle)
		if n == 0 {
			cl.mu.Unlock()
			break
		}
		c := cl.idle[n-1]
		cl.idle = cl.idle[:n-1]
		cl.mu.Unlock()
		if !c.deadline.IsZero() && !now.Before(c.deadline) {
			// Idle connections live their idle time: a deadline left
			// from the header's wait, now passed, would fail the peek.
			// Cleared only then, so back-to-back requests pay nothing.
			_ = c.c.SetReadDeadline(time.Time{})
			c.deadline = time.Time{}
		}
		// The peek is a syscall: made outside the lock, so other requests
		// do not wait on it.
		if now.Sub(c.used) < idleTimeout && !c.unsolicited() {
			return c, true, nil
		}
		c.Close()
	}
	nc, err := cl.dialer.DialContext(ctx, "tcp", cl.addr)
	if err != nil {
		return nil, false, err
	}
	rw := rawio.New(nc) // nc's deadlines bound its calls
	c = &Conn{c: nc, rw: rw, ask: asker{rw: rw}}
	c.lr = limitReader{c: rw, ask: &c.ask, conn: c}
	c.bw = bufio.NewWriterSize(&c.ask, 4<<10)
	c.br = bufio.NewReaderSize(&c.lr, 4<<10)
	c.expire = c.expireNow // a method value: get's own c stays on its stack
	return c, false, nil
}
