package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"
)

// lean is the pass-through path for the common request: a GET, HEAD,
// OPTIONS or TRACE without a body and without Upgrade, to a plain-HTTP
// upstream, with the Handler's own transport. It does on the handler's
// goroutine what httputil.ReverseProxy and http.Transport do on three
// (the handler, the connection's writeLoop and readLoop, with two channel
// hand-offs and their futex wake-ups per request): write the request on an
// idle keep-alive connection, read the answer, stream it back. On 2 cores
// at 3,000 req/s that hand-off and the request clone were most of what a
// pass-through cost beyond a hit (bench -cpu; bench/README.md).
//
// It keeps what ReverseProxy does to a request and an answer: hop-by-hop
// fields and the fields Connection names dropped (RFC 9110 §7.6.1), Te:
// trailers kept, Forwarded and X-Forwarded-For/Host/Proto replaced from the
// client's connection, the upstream's Host; 1xx answers relayed (RFC 9110
// §15.2), trailers announced and relayed (RFC 9110 §6.5), streams of
// unknown length flushed as they come, a broken copy aborting the client's
// connection, 504/502 for a timeout/any other failure. Everything else
// (bodies, upgrades, https, a transport from Options) takes ReverseProxy.
//
// Only replayable requests take it, because it keeps no reader on an idle
// connection: an upstream that closed one is noticed on reuse, and the
// request is sent again on a new connection, as http.Transport does for
// replayable requests (RFC 9110 §9.2.2).
type lean struct {
	addr    string // host:port
	host    string // the Host field (the upstream's, as ReverseProxy's SetURL)
	base    *url.URL
	timeout time.Duration // response-header timeout
	dialer  net.Dialer
	max     int // idle connections kept

	mu     sync.Mutex
	idle   []*leanConn
	closed bool
}

type leanConn struct {
	c    net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	used time.Time // last returned to the pool

	// unsolicited's peek, made on first reuse.
	rc   syscall.RawConn
	peek func(fd uintptr) bool
	bad  bool
}

// unsolicited reports bytes the upstream sent on the idle connection after
// the answer it was asked for, or a connection it closed: read as the next
// answer, they would hand one client's response to another, so such a
// connection is dropped before reuse, as net/http's transport drops one
// ("Unsolicited response received on idle HTTP channel"). One non-blocking
// peek (MSG_PEEK|MSG_DONTWAIT) per reuse.
func (c *leanConn) unsolicited() bool {
	if c.rc == nil {
		sc, ok := c.c.(syscall.Conn)
		if !ok {
			return false
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			return true
		}
		// Made once per connection, so a reuse allocates nothing.
		c.rc, c.peek = rc, func(fd uintptr) bool {
			var b [1]byte
			_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			// No error: surplus bytes, or 0 bytes because the upstream
			// closed. EAGAIN: nothing to read, the idle state.
			c.bad = !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EINTR)
			return true // never wait for readiness
		}
	}
	c.bad = false
	err := c.rc.Read(c.peek)
	return c.bad || err != nil
}

// leanIdleTimeout drops a connection idle this long (as the transport's
// IdleConnTimeout), rather than writing to one the upstream likely closed.
const leanIdleTimeout = 90 * time.Second

// newLean is nil when the upstream is not plain HTTP.
func newLean(up *url.URL, timeout time.Duration, idle int) *lean {
	if up.Scheme != "http" || up.User != nil {
		return nil
	}
	addr := up.Host
	if up.Port() == "" {
		addr = net.JoinHostPort(up.Hostname(), "80")
	}
	if idle <= 0 {
		idle = 256
	}
	return &lean{
		addr: addr, host: up.Host, base: up, timeout: timeout, max: idle,
		dialer: net.Dialer{Timeout: min(timeout, 5*time.Second), KeepAlive: 30 * time.Second},
	}
}

// takes reports whether r goes the lean way.
func (l *lean) takes(r *http.Request) bool {
	if l == nil || r.ContentLength != 0 || (r.Body != nil && r.Body != http.NoBody) {
		return false
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
	default:
		return false
	}
	_, upgrade := r.Header["Upgrade"]
	_, expect := r.Header["Expect"] // the transport answers 100-continue itself
	return !upgrade && !expect && len(r.TransferEncoding) == 0 && r.RequestURI != "*"
}

func (l *lean) get(ctx context.Context) (*leanConn, bool, error) {
	now := time.Now()
	l.mu.Lock()
	for n := len(l.idle); n > 0; n = len(l.idle) {
		c := l.idle[n-1]
		l.idle = l.idle[:n-1]
		if now.Sub(c.used) < leanIdleTimeout && !c.unsolicited() {
			l.mu.Unlock()
			return c, true, nil
		}
		c.c.Close()
	}
	l.mu.Unlock()
	c, err := l.dialer.DialContext(ctx, "tcp", l.addr)
	if err != nil {
		return nil, false, err
	}
	return &leanConn{c: c, br: bufio.NewReaderSize(c, 4<<10), bw: bufio.NewWriterSize(c, 4<<10)}, false, nil
}

func (l *lean) put(c *leanConn) {
	if c.br.Buffered() > 0 {
		// More than the answer announced: never read as the next answer.
		c.c.Close()
		return
	}
	c.used = time.Now()
	l.mu.Lock()
	if !l.closed && len(l.idle) < l.max {
		l.idle = append(l.idle, c)
		c = nil
	}
	l.mu.Unlock()
	if c != nil {
		c.c.Close()
	}
}

// closeIdle closes the idle connections and keeps none from now on (the
// upstream was replaced by a reload).
func (l *lean) closeIdle() {
	if l == nil {
		return
	}
	l.mu.Lock()
	idle := l.idle
	l.idle, l.closed = nil, true
	l.mu.Unlock()
	for _, c := range idle {
		c.c.Close()
	}
}

// leanPass is passWith's lean form (write has no lean form: see takes).
func (x *exchange) leanPass(st status) {
	l, r, w := x.st.lean, x.r, x.w
	ctx := r.Context()
	var (
		c    *leanConn
		resp *http.Response
		err  error
	)
	// A reused connection the upstream closed fails before any answer:
	// once more on a fresh one (both replayable: see lean).
	for attempt := 0; attempt < 2; attempt++ {
		var reused bool
		if c, reused, err = l.get(ctx); err != nil {
			break
		}
		resp, err = x.leanRoundTrip(ctx, c)
		if err == nil {
			break
		}
		c.c.Close()
		if !reused || !retryable(err) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		x.leanFail(err, st)
		return
	}
	took := x.h.now().Sub(x.start)
	x.rs.m.Upstream(resp.StatusCode, took)
	if x.rec != nil {
		x.rec.Upstream = took
	}
	removeHopHeaders(resp.Header)
	x.h.tagh.stripFrom(resp.Header)
	st.fwdStatus = resp.StatusCode
	resp.Header["Cache-Status"] = []string{appendCacheStatus(resp.Header.Get("Cache-Status"), st.String())}
	dst := w.Header()
	for k, vs := range resp.Header {
		dst[k] = vs
	}
	if len(resp.Trailer) > 0 {
		names := make([]string, 0, len(resp.Trailer))
		for k := range resp.Trailer {
			names = append(names, k)
		}
		dst.Add("Trailer", strings.Join(names, ", "))
	}
	w.WriteHeader(resp.StatusCode)
	announced := len(resp.Trailer)
	if err := x.leanCopy(w, resp); err != nil {
		// Closing the connection, never the body: http's body would
		// drain the rest of a stream that may not end.
		c.c.Close()
		if ctx.Value(http.ServerContextKey) != nil {
			// As ReverseProxy: the client must see the answer broken,
			// not a short one that looks whole.
			panic(http.ErrAbortHandler)
		}
		return
	}
	if resp.Close {
		c.c.Close()
	} else {
		l.put(c) // the body was read to its end
	}
	if len(resp.Trailer) > 0 {
		_ = http.NewResponseController(w).Flush() // chunked, so trailers can follow
		if len(resp.Trailer) == announced {
			for k, vs := range resp.Trailer {
				dst[k] = vs
			}
		} else {
			for k, vs := range resp.Trailer {
				for _, v := range vs {
					dst.Add(http.TrailerPrefix+k, v)
				}
			}
		}
	}
}

// leanRoundTrip writes the request on c and reads the answer's header,
// relaying 1xx answers to the client on the way.
func (x *exchange) leanRoundTrip(ctx context.Context, c *leanConn) (*http.Response, error) {
	r := x.r
	if err := x.writeLeanRequest(c.bw); err != nil {
		return nil, err
	}
	// The response-header timeout, and the client leaving, both end the
	// wait by a deadline in the past.
	_ = c.c.SetReadDeadline(time.Now().Add(x.st.lean.timeout))
	stop := context.AfterFunc(ctx, func() { _ = c.c.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	for {
		resp, err := http.ReadResponse(c.br, r)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errors.New("proxy: upstream switched protocols on a request that did not ask to upgrade")
		case resp.StatusCode >= 100 && resp.StatusCode < 200:
			x.h.tagh.stripFrom(resp.Header)
			dst := x.w.Header()
			for k, vs := range resp.Header {
				dst[k] = vs
			}
			x.w.WriteHeader(resp.StatusCode)
			for k := range resp.Header {
				delete(dst, k)
			}
			continue
		}
		if !stop() {
			return nil, ctx.Err() // the client left as the header arrived
		}
		if resp.ContentLength < 0 || resp.ContentLength > int64(c.br.Buffered()) {
			// A long download that has started is not cut. A body already
			// read whole needs no call: the next request sets its own.
			_ = c.c.SetReadDeadline(time.Time{})
		}
		resp.Request = nil
		return resp, nil
	}
}

// writeLeanRequest writes what ReverseProxy with SetURL and SetXForwarded
// would send, without cloning the request.
func (x *exchange) writeLeanRequest(bw *bufio.Writer) error {
	r, l := x.r, x.st.lean
	bw.WriteString(r.Method)
	bw.WriteByte(' ')
	if l.base.Path == "" && l.base.RawQuery == "" {
		bw.WriteString(r.URL.EscapedPath())
		if r.URL.RawQuery != "" || r.URL.ForceQuery {
			bw.WriteByte('?')
			bw.WriteString(r.URL.RawQuery)
		}
	} else {
		out := &http.Request{URL: new(url.URL), Header: http.Header{}}
		*out.URL = *r.URL
		(&httputil.ProxyRequest{In: r, Out: out}).SetURL(l.base)
		bw.WriteString(out.URL.RequestURI())
	}
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(l.host)
	bw.WriteString("\r\n")
	conn := r.Header["Connection"]
	for k, vs := range r.Header {
		switch k {
		case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
			"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Host", "Content-Length",
			"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto":
			continue
		case "User-Agent":
			// As ReverseProxy over http.Transport: one User-Agent, never
			// an empty one, and never Go's own when the client sent none.
			if len(vs) > 0 && vs[0] != "" {
				bw.WriteString("User-Agent: ")
				headerValue(bw, vs[0])
				bw.WriteString("\r\n")
			}
			continue
		}
		if len(conn) > 0 && namedIn(conn, k) {
			continue
		}
		for _, v := range vs {
			bw.WriteString(k)
			bw.WriteString(": ")
			headerValue(bw, v)
			bw.WriteString("\r\n")
		}
	}
	if namedIn(r.Header["Te"], "trailers") {
		bw.WriteString("Te: trailers\r\n")
	}
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		bw.WriteString("X-Forwarded-For: ")
		bw.WriteString(ip)
		bw.WriteString("\r\n")
	}
	bw.WriteString("X-Forwarded-Host: ")
	headerValue(bw, r.Host)
	if r.TLS != nil {
		bw.WriteString("\r\nX-Forwarded-Proto: https\r\n\r\n")
	} else {
		bw.WriteString("\r\nX-Forwarded-Proto: http\r\n\r\n")
	}
	return bw.Flush()
}

// headerValue writes v with CR and LF as spaces, as http.Header.Write does.
func headerValue(bw *bufio.Writer, v string) {
	if strings.ContainsAny(v, "\r\n") {
		v = strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
	}
	bw.WriteString(strings.TrimSpace(v))
}

// namedIn reports whether a list field (Connection, Te) names k
// (RFC 9110 §7.6.1, §10.1.4).
func namedIn(conn []string, k string) bool {
	for _, f := range conn {
		for _, name := range strings.Split(f, ",") {
			if strings.EqualFold(strings.TrimSpace(name), k) {
				return true
			}
		}
	}
	return false
}

// leanCopy streams the body to its end with a pooled buffer, by Read and
// Write rather than io.Copy: the ResponseWriter's ReadFrom would send the
// header in a write of its own, where Write lets a small answer leave in
// one. A body of unknown length or an event stream is flushed after every
// read, as ReverseProxy does.
func (x *exchange) leanCopy(w http.ResponseWriter, resp *http.Response) error {
	if resp.Body == http.NoBody {
		return nil
	}
	buf := x.h.bufs.Get()
	defer x.h.bufs.Put(buf)
	var rc *http.ResponseController
	if resp.ContentLength == -1 || isEventStream(resp.Header) {
		rc = http.NewResponseController(w)
	}
	for {
		n, rerr := resp.Body.Read(buf)
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

// retryable: a reused connection the upstream had closed.
func retryable(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// leanFail is ReverseProxy's ErrorHandler for the lean path.
func (x *exchange) leanFail(err error, st status) {
	if x.r.Context().Err() != nil {
		return // there is no one to answer
	}
	x.rs.m.Upstream(0, x.h.now().Sub(x.start))
	x.h.log.Warn("upstream", "method", x.r.Method, "path", x.r.URL.Path, "err", err)
	writeUpstreamError(x.w, classify(err), st)
}
