// Package mget is a lean Redis client for the L2 hit's one command: an
// MGET of an entry key and its tags' epoch keys, on a single Redis.
//
// An L2 hit is one MGET (internal/cache/l2, fastread.go), and on the
// sidecar the go-redis call around it cost more than the round trip's
// syscalls: a pool Get that tests the connection's health with a
// non-blocking read syscall every time, hooks, the RESP3 push-notification
// peek before each reply, per-command allocations (docs/coherence.md, "The
// L2 read"). Pool speaks RESP2 on its own connections, for that command
// only: it writes the MGET with the keys appended straight into the
// connection's buffer, writes it in the poller call that waits for the
// reply (rawio's Ask: no read that finds nothing yet), reads the reply
// into one allocation for the entry, and returns the connection to a free
// list without a health check — a connection the server closed meanwhile
// fails the read (EOF, reset) and the call is retried once on a new
// connection, as go-redis's MaxRetries 1 does.
//
// It keeps what the go-redis client guaranteed:
//   - the context's deadline bounds the call (the socket's deadline is
//     set from it; without one, the caller's): a stalled Redis fails the
//     call at the deadline, with the connection closed since a late reply
//     would answer the next command;
//   - at most MaxConns connections, a caller waiting for one no longer
//     than its deadline;
//   - a missing key is a nil element, an error reply an Error, which
//     implements redis.Error (so the store classifies it as go-redis's).
//
// A failure that is the sidecar's lateness, not Redis's, is marked so
// (internal/cache/l2/late). It serves a single Redis only: Cluster (slots,
// redirections) and Sentinel (the master changes) keep go-redis.
package mget

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l2/late"
	"github.com/sidecache/sidecache/internal/rawio"
)

// Options are a Pool's.
type Options struct {
	Addr     string // host:port of the one Redis
	Username string // AUTH's, if any
	Password string
	DB       int        // SELECTed when not 0
	MaxConns int        // open connections at most (DefaultConns)
	Stall    late.Stall // tests only: runs before each MGET's write and read
}

// Pool is a bounded pool of RESP2 connections that run MGET.
type Pool struct {
	addr     string
	user     string
	pass     string
	db       int
	dialer   net.Dialer
	slots    chan struct{} // one token per open or opening connection
	mu       sync.Mutex
	idle     []*conn
	isClosed bool

	// stall, tests only, runs before each MGET's write and before its
	// read with the connection: how a test makes the sidecar late
	// (internal/cache/l2/late). Nil in production.
	stall late.Stall
}

type conn struct {
	nc   net.Conn
	rw   *rawio.Conn   // nc's reads and writes, raw (internal/rawio)
	src  reply         // rw's reads, and the MGET's Ask
	br   *bufio.Reader // over src
	buf  []byte        // the command written; the epochs' values read (until put)
	vals [][]byte      // mget's answer (until put)
	ends []int         // where each epoch's value starts in buf, -1: nil
	dl   time.Time     // the socket's deadline, as last set (zero: none)

	stall late.Stall // the pool's
}

// maxBulk is the largest bulk string Pool accepts: Redis's own limit
// (proto-max-bulk-len, 512 MiB). A larger length is a broken stream.
const maxBulk = 512 << 20

// maxIdleBuf bounds the buffer an idle connection keeps: a reply with
// large epoch values (not what this store writes there) does not stay
// allocated.
const maxIdleBuf = 64 << 10

// Error is an error reply, Redis's text as it is.
type Error string

func (e Error) Error() string { return string(e) }

// RedisError makes Error a redis.Error.
func (Error) RedisError() {}

var (
	// errProto is a reply that is not RESP2 as MGET answers it.
	errProto = errors.New("mget: redis protocol error")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("mget: closed")
)

// New returns a pool for o; it dials on demand.
func New(o Options) *Pool {
	return &Pool{
		addr: o.Addr, user: o.Username, pass: o.Password, db: o.DB,
		slots: make(chan struct{}, o.MaxConns),
		stall: o.Stall,
	}
}

// MGet runs MGET key rest... before dl (or ctx's deadline, if sooner),
// key being the concatenation of its three parts, and calls use with the
// values (nil: no such key, or not a string). vals[0], key's, is the
// caller's to keep; vals and the others are valid only during use. now is
// the caller's reading of the clock, from which it set dl: the call reads
// it no more on the way of a pooled connection (setDeadline), where each
// reading cost about as much as the MGET's framing (up to 0.3 µs on a
// loaded virtual machine).
func (p *Pool) MGet(ctx context.Context, now, dl time.Time, key [3]string, rest []string, use func(vals [][]byte)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	for try := 0; ; try++ {
		c, reused, err := p.get(ctx, dl)
		if err != nil {
			return err
		}
		vals, err := c.mget(now, dl, key, rest)
		if err == nil {
			use(vals)
			clear(vals) // the entry is the caller's, not the idle connection's
			if cap(c.buf) > maxIdleBuf {
				c.buf = nil
			}
			p.put(c)
			return nil
		}
		var rerr Error
		if errors.As(err, &rerr) {
			p.put(c) // the reply was read whole: the connection is fine
			return err
		}
		var le *late.Error
		if errors.As(err, &le) && le.Unsent() {
			p.put(c) // nothing written: the connection is fine
			return err
		}
		err = late.ReadFailed(c.nc, err) // before the close: is the reply there?
		p.drop(c)
		var ne net.Error
		if try > 0 || !reused || ctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()) {
			return err
		}
		// A pooled connection the server closed: once more, on a new one.
	}
}

// get takes an idle connection or dials one, waiting for a free slot no
// longer than dl (or ctx's cancellation).
func (p *Pool) get(ctx context.Context, dl time.Time) (*conn, bool, error) {
	select {
	case p.slots <- struct{}{}:
	default:
		t := time.NewTimer(time.Until(dl))
		defer t.Stop()
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, false, fmt.Errorf("mget: no free connection: %w", ctx.Err())
		case <-t.C:
			// Not evidence: the holders report their own outcomes (late).
			return nil, false, late.Mark(fmt.Errorf("mget: no free connection: %w", context.DeadlineExceeded))
		}
	}
	p.mu.Lock()
	if p.isClosed {
		p.mu.Unlock()
		<-p.slots
		return nil, false, ErrClosed
	}
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, true, nil
	}
	p.mu.Unlock()
	if !time.Now().Before(dl) {
		<-p.slots
		return nil, false, late.Mark(fmt.Errorf("mget: dial: %w", context.DeadlineExceeded))
	}
	c, err := p.dial(ctx, dl)
	if err != nil {
		<-p.slots
		return nil, false, err
	}
	return c, false, nil
}

func (p *Pool) put(c *conn) {
	p.mu.Lock()
	if p.isClosed {
		p.mu.Unlock()
		p.drop(c)
		return
	}
	p.idle = append(p.idle, c)
	p.mu.Unlock()
	<-p.slots
}

func (p *Pool) drop(c *conn) {
	_ = c.nc.Close()
	<-p.slots
}

// Close closes the idle connections; those in use are closed when put.
// Calls after it fail with ErrClosed.
func (p *Pool) Close() {
	p.mu.Lock()
	p.isClosed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, c := range idle {
		_ = c.nc.Close()
	}
}

// dial opens a connection and authenticates and selects the database as
// go-redis does (RESP2: no HELLO).
func (p *Pool) dial(ctx context.Context, dl time.Time) (*conn, error) {
	dctx, cancel := context.WithDeadline(ctx, dl)
	defer cancel()
	nc, err := late.Dial(dctx, p.dialer, p.addr)
	if err != nil {
		return nil, err
	}
	rw := rawio.New(nc) // the socket's deadline (SetDeadline) bounds its calls
	c := &conn{nc: nc, rw: rw, src: reply{rw: rw}, buf: make([]byte, 0, 512), stall: p.stall}
	c.br = bufio.NewReaderSize(&c.src, 4096)
	var cmds [][]string
	switch {
	case p.user != "":
		cmds = append(cmds, []string{"AUTH", p.user, p.pass})
	case p.pass != "":
		cmds = append(cmds, []string{"AUTH", p.pass})
	}
	if p.db != 0 {
		cmds = append(cmds, []string{"SELECT", strconv.Itoa(p.db)})
	}
	if len(cmds) > 0 {
		if err := c.handshake(dl, cmds); err != nil {
			err = late.ReadFailed(nc, err)
			_ = nc.Close()
			return nil, err
		}
	}
	return c, nil
}

func (c *conn) handshake(dl time.Time, cmds [][]string) error {
	if err := c.setDeadline(time.Now(), dl); err != nil {
		return err
	}
	b := c.buf[:0]
	for _, args := range cmds {
		b = appendArray(b, len(args))
		for _, a := range args {
			b = appendBulk(b, a, "", "")
		}
	}
	c.buf = b
	if n, err := c.rw.Write(b); err != nil {
		return late.WriteFailed(n, err)
	}
	for range cmds {
		line, err := c.line()
		if err != nil {
			return err
		}
		if line[0] == '-' {
			return Error(line[1:])
		}
	}
	return nil
}

// deadlineSlack is the share of a call's time (dl less now) by which the
// socket's deadline may come before dl and still serve the call: the
// deadline a connection carries from its last call is kept rather than
// set again (setDeadline).
const deadlineSlack = 16

// setDeadline bounds the socket's reads and writes by dl: by the deadline
// set for an earlier call, when that one is no later than dl and leaves
// the call all but 1/deadlineSlack of its time, else by dl itself. Setting
// a socket's deadline takes its poller's lock and moves a runtime timer
// (internal/poll), and on a connection in steady use the deadline set a
// few calls ago serves as well: a connection reused within 1/16 of the
// timeout (6 ms of the default 100 ms) keeps it. The call is never given
// longer than dl. now is the caller's reading of the clock: the slack is
// measured from it, so a call that reads it a few microseconds late grants
// the kept deadline as many sixteenths of them more, never time past dl.
func (c *conn) setDeadline(now, dl time.Time) error {
	if !c.dl.IsZero() && !c.dl.After(dl) && dl.Sub(c.dl) <= dl.Sub(now)/deadlineSlack {
		return nil
	}
	if err := c.nc.SetDeadline(dl); err != nil {
		c.dl = time.Time{}
		return err
	}
	c.dl = dl
	return nil
}

// mget writes the command and reads its reply before dl; now is MGet's.
func (c *conn) mget(now, dl time.Time, key [3]string, rest []string) ([][]byte, error) {
	if err := c.setDeadline(now, dl); err != nil {
		return nil, err
	}
	b := appendArray(c.buf[:0], 2+len(rest))
	b = appendBulk(b, "MGET", "", "")
	b = appendBulk(b, key[0], key[1], key[2])
	for _, k := range rest {
		b = appendBulk(b, k, "", "")
	}
	c.buf = b
	if err := c.send(b); err != nil {
		return nil, err
	}
	line, err := c.line()
	if err != nil {
		if c.src.werr != nil { // Ask's write failed: nothing was read
			return nil, late.WriteFailed(c.src.wrote, c.src.werr)
		}
		return nil, err
	}
	switch line[0] {
	case '-':
		return nil, Error(line[1:])
	case '*':
	default:
		return nil, errProto
	}
	n, err := strconv.Atoi(string(line[1:]))
	if err != nil || n != 1+len(rest) {
		return nil, errProto
	}
	if cap(c.vals) < n {
		c.vals, c.ends = make([][]byte, n), make([]int, n)
	}
	vals, ends := c.vals[:n], c.ends[:n] // the epochs' values live in scratch, which may grow
	clear(vals)
	scratch := c.buf[:0]
	for i := range n {
		line, err := c.line()
		if err != nil {
			return nil, err
		}
		if line[0] != '$' {
			return nil, errProto
		}
		m, err := strconv.Atoi(string(line[1:]))
		if err != nil || m < -1 || m > maxBulk {
			return nil, errProto
		}
		if m == -1 {
			ends[i] = -1
			continue
		}
		if i == 0 {
			v := make([]byte, m+2)
			if _, err := io.ReadFull(c.br, v); err != nil {
				return nil, err
			}
			vals[0] = v[:m:m]
			continue
		}
		start := len(scratch)
		scratch = append(scratch, make([]byte, m+2)...)
		if _, err := io.ReadFull(c.br, scratch[start:]); err != nil {
			return nil, err
		}
		scratch = scratch[:start+m]
		ends[i] = start
	}
	c.buf = scratch
	for i := 1; i < n; i++ {
		if ends[i] < 0 {
			continue
		}
		end := len(scratch)
		for j := i + 1; j < n; j++ {
			if ends[j] >= 0 {
				end = ends[j]
				break
			}
		}
		vals[i] = scratch[ends[i]:end:end]
	}
	return vals, nil
}

// line reads one reply line without its CRLF. It is valid until the next
// read.
func (c *conn) line() ([]byte, error) {
	l, err := c.br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, errProto
		}
		return nil, err
	}
	if len(l) < 3 || l[len(l)-2] != '\r' {
		return nil, errProto
	}
	return l[:len(l)-2], nil
}

func appendArray(b []byte, n int) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

// appendBulk appends the bulk string a+b+c: a key written from its parts
// without concatenating them first.
func appendBulk(buf []byte, a, b, c string) []byte {
	buf = append(buf, '$')
	buf = strconv.AppendInt(buf, int64(len(a)+len(b)+len(c)), 10)
	buf = append(buf, '\r', '\n')
	buf = append(buf, a...)
	buf = append(buf, b...)
	buf = append(buf, c...)
	return append(buf, '\r', '\n')
}

// Idle is the number of idle connections pooled.
func (p *Pool) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// DefaultConns is go-redis's default PoolSize, 10 connections per
// GOMAXPROCS: the store's bound for its pool.
func DefaultConns() int { return 10 * runtime.GOMAXPROCS(0) }
