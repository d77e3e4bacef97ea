// Package edge is what the sidecar's listeners do before a request reaches
// the proxy: the client's side of the HTTP edge, where one client must not
// hold resources forever nor confuse a front proxy.
//
//   - conn.go: each accepted connection bounds the time between two
//     successful writes (NGINX's send_timeout), so a client that stops
//     reading cannot pin an upstream request, and notes a header section
//     that carried both Content-Length and Transfer-Encoding, which
//     net/http drops before any handler can see it (RFC 9112 §6.1);
//   - fold.go: follows the requests' framing on the connection to find a
//     header section with an obs-fold, which net/http joins into the
//     field before it (RFC 9112 §5.2), and drops the empty lines a
//     client sends before a request line, which net/http refuses
//     (RFC 9112 §2.2), and stray CRs there, as NGINX;
//   - guard.go: the request rules net/http does not apply — framing the
//     server must answer and close (RFC 9112 §6.1), the asterisk-form for
//     OPTIONS only (RFC 9112 §3.2.4), Max-Forwards and TRACE
//     (RFC 9110 §7.6.2, §9.3.8), loops (Via, RFC 9110 §7.6.3) and upgrades
//     (RFC 9110 §7.8, RFC 9113 §3.1);
//   - wire.go: what net/http answers itself, before any handler (a
//     malformed request, a header block over its bound), seen on the
//     connection;
//   - gone.go: a client that left (closed or half-closed) while its
//     request waited is sent nothing more, not net/http's implicit empty
//     200;
//   - bodytimeout.go: a request whose body was still arriving at the read
//     deadline is answered 408 and its connection closed;
//   - sendbudget.go: the proxy listener's bound on the bytes held by
//     writes waiting on a full socket (server.max_pending_send_bytes,
//     internal/sendbudget): past it, the writes held longest without
//     progress are cut;
//   - headerbudget.go: both listeners' bound on the bytes of header
//     sections still being read (server.max_pending_header_bytes,
//     internal/headerbudget): past it, the connections holding the most
//     are answered 431 and closed;
//   - limit.go: the proxy listener's bound on open connections
//     (server.max_connections, internal/connlimit): at it, the oldest
//     idle keep-alive connection is closed for a new one, or, none idle,
//     the listener stops accepting until one is;
//   - linger.go: after net/http's own refusals (400, 417, 431, 501, 505),
//     and whenever it closes while its client may still be sending a
//     request (an answer made before the body was read to its end), the
//     connection reads on what the client still sends before it closes,
//     so the client reads the answer rather than a reset.
//
// All tell a Counter what they refuse or cut, by reason (guard.go). It
// knows nothing of routes or caching; internal/server wires it around
// the proxy on both listeners.
package edge

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sidecache/sidecache/internal/connlimit"
	"github.com/sidecache/sidecache/internal/headerbudget"
	"github.com/sidecache/sidecache/internal/rawio"
	"github.com/sidecache/sidecache/internal/sendbudget"
)

// Listener wraps ln so that every connection it accepts bounds its writes
// (writeTimeout between two writes that made progress; 0: none) and notes
// ambiguous framing for Guard. Pair it with ConnContext on the http.Server.
// count (nil: none) is told each connection cut at writeTimeout.
func Listener(ln net.Listener, writeTimeout time.Duration, count Counter) net.Listener {
	return &listener{Listener: ln, wt: writeTimeout, count: count}
}

type listener struct {
	net.Listener
	wt    time.Duration
	count Counter
	// lim, when set, bounds the connections open at once (limit.go);
	// done ends its waits once the listener is closed.
	lim       *connlimit.Limiter
	done      chan struct{}
	closeOnce sync.Once
	// sends, when set, bounds what the connections' waiting writes hold
	// (sendbudget.go); heads, what their unfinished header sections hold
	// (headerbudget.go).
	sends *sendbudget.Budget
	heads *headerbudget.Budget
}

func (l *listener) Accept() (net.Conn, error) {
	if l.lim != nil {
		return l.acceptLimited()
	}
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	ec := &Conn{Conn: c, wt: l.wt, count: l.count, io: rawio.New(c), sends: l.sends, heads: l.heads}
	return ec, nil
}

// Conn is one client connection accepted by Listener.
type Conn struct {
	net.Conn
	wt    time.Duration
	count Counter
	cut   atomic.Bool // cut at wt: counted once, whoever writes next
	// both: a header section on this connection carried Content-Length
	// and Transfer-Encoding together (scan, read on the connection's
	// goroutine; loaded by the handler's).
	both atomic.Bool
	// te: a header section on this connection carried Transfer-Encoding,
	// which net/http deletes from an HTTP/1.0 request (and ignores).
	te   atomic.Bool
	scan scanner
	// folds follows the requests' framing for obs-fold (fold.go), on
	// the reading goroutine; folded is its first folded section (0:
	// none), unscanned the first section it did not read, having lost
	// the framing (0: none), both for the handler's; reqs numbers the
	// requests handed to the handler (Wire), on the handler's
	// goroutine. left: the connection was hijacked (Wire), its bytes
	// are no longer HTTP requests.
	folds     folds
	folded    atomic.Int64
	unscanned atomic.Int64
	reqs      int64
	left      atomic.Bool
	// io: the connection's reads and writes, by raw system calls
	// (internal/rawio: no sysmon wake at each busy period's first).
	io  *rawio.Conn
	wmu sync.Mutex // one Write at a time, its wait included (Write)
	// phase: whether a handler's answer is in progress (wire.go).
	phase atomic.Int32
	// gone: a read ended at the client's end of stream or failed other
	// than by a deadline (gone.go).
	gone atomic.Bool
	// body: the body of the request being answered, nil when it has
	// none (Wire; bodytimeout.go). Set and read on the handler's
	// goroutine.
	body *timedBody
	// section: the bytes of the header section being answered, as the
	// scan measured them (0: not seen), for Wire's bound; stored by
	// Read, loaded by the handler.
	section atomic.Int64
	// linger: the connection drains what its client still sends after
	// net/http's own refusal, or after a close while it was owed more,
	// and closes once that is over (linger.go).
	linger atomic.Pointer[lingering]
	// owed: the bytes read so far end inside a request (folds), so its
	// client may still be sending; stored by Read, loaded by Close (a
	// hijacked connection, left, is its hijacker's to close).
	owed atomic.Bool
	// slot: the connection's place under server.max_connections (nil:
	// unbounded), given back when its socket closes (limit.go).
	slot *connlimit.Slot
	// begun: the header sections the fold scan has seen begin (folds),
	// stored by Read; more than reqs when the next request came behind
	// the last (pipelined), which makes the connection no idle one.
	begun atomic.Int64
	// sends: the process's bound on the bytes of writes waiting on a
	// full socket (nil: none); hold, this connection's waiting write's
	// place in it, under wmu (sendbudget.go).
	sends *sendbudget.Budget
	hold  sendbudget.Hold
	// heads: the process's bound on the bytes of header sections still
	// being read (nil: none); hhold, this connection's place in it, and
	// hcounted, whether it is counted (set by the reading goroutine,
	// cleared by it or as the socket closes); hrefused, under hmu:
	// answered 431 at the bound (headerbudget.go).
	heads    *headerbudget.Budget
	hhold    headerbudget.Hold
	hcounted atomic.Bool
	hmu      sync.Mutex
	hrefused bool
}

type connKey struct{}

// ConnContext is http.Server's ConnContext: it makes the connection
// reachable from its requests (FromContext).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if ec, ok := c.(*Conn); ok {
		return context.WithValue(ctx, connKey{}, ec)
	}
	return ctx
}

// FromContext is the connection a request came on; nil when it did not
// come through Listener.
func FromContext(ctx context.Context) *Conn {
	c, _ := ctx.Value(connKey{}).(*Conn)
	return c
}

// AmbiguousFraming reports whether a header section read on c carried both
// Content-Length and Transfer-Encoding (RFC 9112 §6.1).
func (c *Conn) AmbiguousFraming() bool { return c.both.Load() }

// Folded reports whether the header section of the request being
// answered on c (the reqs-th) had an obs-fold (fold.go).
func (c *Conn) Folded() bool { return c.reqs > 0 && c.folded.Load() == c.reqs }

// Unscanned reports whether the header section of the request being
// answered on c was not read by the fold scan: it lost the framing at an
// earlier request (fold.go), one net/http should have refused.
func (c *Conn) Unscanned() bool {
	u := c.unscanned.Load()
	return c.reqs > 0 && u != 0 && u <= c.reqs
}

// LastScanned reports whether the fold scan lost the framing at the
// request being answered on c (its header section read, not its body's
// end): no later request on c would be read, so c closes after it.
func (c *Conn) LastScanned() bool { return c.reqs > 0 && c.unscanned.Load() == c.reqs+1 }

// SawTransferEncoding reports whether a header section read on c carried
// Transfer-Encoding.
func (c *Conn) SawTransferEncoding() bool { return c.te.Load() }

// Read reads what net/http is to read: the connection's bytes, less
// the CR and LF before a request line (fold.go), scanned for framing
// and folds. Once hijacked it reads them as they come.
func (c *Conn) Read(p []byte) (int, error) {
	if c.left.Load() {
		c.folds.st = fsLost // on the reading goroutine, as every folds access
		n, err := c.folds.read(c.io, p)
		if err != nil && !timeout(err) {
			c.gone.Store(true)
		}
		return n, err
	}
	n, err := c.folds.read(c.io, p)
	if err != nil && !timeout(err) {
		c.gone.Store(true)
	}
	if n > 0 && c.slot != nil {
		c.slot.Busy() // a request begins: never closed to make room
		c.begun.Store(c.folds.sections)
	}
	if c.folds.st == fsLost && c.unscanned.Load() == 0 {
		c.unscanned.Store(c.folds.sections + 1)
	}
	if n > 0 {
		both, te := c.scan.feed(p[:n])
		if both {
			c.both.Store(true)
		}
		if te {
			c.te.Store(true)
		}
		if c.folds.first != 0 && c.folded.Load() == 0 {
			c.folded.Store(c.folds.first)
		}
		c.owed.Store(c.folds.midRequest())
		if c.scan.end > 0 && !c.scan.told {
			c.scan.told = true
			c.section.Store(c.scan.end)
		}
	}
	if c.heads != nil {
		if cut := c.countHeaders(n, err); cut != nil {
			return 0, cut
		}
	}
	return n, err
}

// Write writes p with NGINX send_timeout semantics: the deadline is the
// time between two writes that made progress, not the whole response, so
// a long download to a client that reads goes on, and one to a client
// that stopped reading ends after wt. Then the connection is closed: the
// handler's next write fails, and the upstream request it relays ends
// with it (every pass-through path aborts on a failed write).
//
// A write the socket takes whole at once cannot stall, so it goes without
// a deadline (rawio's WriteNow): only what is left when the socket's
// buffer is full waits, and the window starts then, as it would have.
// Setting the deadline on every write (a clock read and a timer reset
// each) cost about 1 µs of each pass-through request at 3,000 req/s.
func (c *Conn) Write(p []byte) (int, error) {
	if c.phase.Load() == phaseReading && c.refusedByNetHTTP(p) {
		n, err := c.write(p)
		c.lingerAfter() // linger.go
		return n, err
	}
	return c.write(p)
}

// write is Write once net/http's own answers are told apart.
func (c *Conn) write(p []byte) (int, error) {
	if c.wt <= 0 && c.sends == nil {
		return c.io.Write(p)
	}
	// Held for the whole write, the wait included, as net.Conn holds its
	// own lock: a concurrent writer's bytes never land between what the
	// socket took at once and the rest.
	c.wmu.Lock()
	defer c.wmu.Unlock()
	written := 0
	var failed error
	if len(p) > 0 {
		// A deadline already passed (left by an earlier write's wait), a
		// closed connection or a failure writes nothing or less: the
		// deadline's path below meets the same and returns it.
		written, failed = c.io.WriteNow(p)
		if written == len(p) {
			return written, nil
		}
	}
	// The socket is full: p waits, and is held while it does
	// (server.max_pending_send_bytes, sendbudget.go). A write that
	// failed (a connection cut or closed) will not wait: not counted.
	if c.sends != nil && len(p) > 0 && failed == nil {
		c.sends.Begin(&c.hold, c, p)
		defer c.sends.End(&c.hold)
	}
	if c.wt <= 0 {
		n, err := c.io.Write(p[written:])
		return written + n, err
	}
	for {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(c.wt))
		n, err := c.io.Write(p[written:])
		written += n
		if err == nil {
			return written, nil
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return written, err
		}
		if n == 0 {
			if c.cut.CompareAndSwap(false, true) && c.count != nil {
				c.count.EdgeRefused(ReasonWriteTimeout)
			}
			c.closeSocket()
			return written, err
		}
		// Progress within the window: the client reads, slowly. A new
		// window for the rest.
	}
}

// scanner finds, in the bytes a connection reads, a header section with
// both a Content-Length and a Transfer-Encoding field line, which net/http
// accepts (Transfer-Encoding wins) after deleting Content-Length, so no
// handler could tell. It looks at the start of every line: a body's bytes
// may only make it see fields that are not there (the request is then
// answered and the connection closed, no worse), never hide one a header
// section has, since a header section's lines all start lines.
//
// It also measures a request's header section, for Wire's bound: the
// bytes from where the connection went idle (mark) to the end of the
// first empty line after it. That is the section exactly when the client
// sent the request after its previous answer, and less than it otherwise
// (pipelined: net/http had read its start already).
type scanner struct {
	// since counts the bytes fed since mark; end is the offset from mark
	// past the first empty line after it, 0 until one is seen; told: end
	// was handed to the connection (Conn.section).
	since, end int64
	told       bool
	line       [len("transfer-encoding:")]byte
	n          int  // bytes of the current line kept (up to len(line))
	cl, te     bool // in the current section
	// skip: the current line's first byte starts neither field name nor
	// an empty line, so none of it is kept (most lines: the request line,
	// Host, Accept, User-Agent, ...).
	skip bool
}

var (
	clName = []byte("content-length:")
	teName = []byte("transfer-encoding:")
)

// feed scans p and reports whether a section with both fields, or with
// Transfer-Encoding, ended in it. It jumps from line end to line end
// (bytes.IndexByte) and looks at no more than a field name's length of
// each line, so a body costs little more than the search for '\n'.
func (s *scanner) feed(p []byte) (both, te bool) {
	base, off := s.since, int64(0)
	s.since += int64(len(p))
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		seg := p
		if i >= 0 {
			seg = p[:i]
		}
		if s.n == 0 && !s.skip && len(seg) > 0 {
			switch seg[0] {
			case 'c', 'C', 't', 'T', '\r':
			default:
				s.skip = true
			}
		}
		if !s.skip && s.n < len(s.line) {
			k := copy(s.line[s.n:], seg)
			for j := s.n; j < s.n+k; j++ {
				if c := s.line[j]; 'A' <= c && c <= 'Z' {
					s.line[j] = c + 'a' - 'A'
				}
			}
			s.n += k
		}
		if i < 0 {
			return both, te
		}
		switch {
		case s.skip:
		case s.n == 0 || s.n == 1 && s.line[0] == '\r':
			// An empty line ends a section.
			both = both || s.cl && s.te
			te = te || s.te
			s.cl, s.te = false, false
			if s.end == 0 {
				s.end = base + off + int64(i) + 1
			}
		case s.n >= len(clName) && string(s.line[:len(clName)]) == string(clName):
			s.cl = true
		case s.n >= len(teName) && string(s.line[:len(teName)]) == string(teName):
			s.te = true
		}
		s.n, s.skip = 0, false
		p = p[i+1:]
		off += int64(i) + 1
	}
	return both, te
}

// mark starts the measure of the next header section here (the
// connection is idle, or new). The line being scanned goes on: a mark
// is no line start, and taking it for one could hide a field.
func (s *scanner) mark() { s.since, s.end, s.told = 0, 0, false }
