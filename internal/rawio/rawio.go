// Package rawio reads and writes a socket with the raw system call, on the
// goroutine's own P, instead of net.Conn's syscall.Read and syscall.Write.
//
// Why: syscall.Read and syscall.Write go through syscall.Syscall, which
// calls the runtime's entersyscall, and entersyscall wakes the sysmon
// thread whenever it is in its deep sleep (sched.sysmonwait; runtime
// proc.go, reentersyscall → entersyscallWakeSysmon). A sidecar that goes
// idle between requests (GOMAXPROCS=1, cmd/sidecache/gc.go) pays a sysmon
// wake and sleep (futex and nanosleep context switches) at the first
// syscall of every busy period. Measured by `bin/bench -cpu` (bench/README.md;
// bench/results/CPU-2026-11-26-0207.md and -0221.md: /proc CPU per
// request at 3,000 req/s open loop, one core, median of 3 rounds, this
// package against the build before it, in the same runs): L1 hit 54.0 /
// 55.3 → 43.3 / 45.7 µs, pass-through 96.0 / 100.3 → 68.0 / 80.3 µs,
// batched miss 92.7 / 99.7 → 79.3 / 83.0 µs, L2 hit 110.3 / 92.7 → 82.7 /
// 76.7 µs. Context switches per request (perf stat -e context-switches
// -p PID over 10 s at 3,000 req/s, bench/profile-l2-hit.sh and
// bench/profile-batched-miss.sh): L1 hit 1.4–1.6 → 0.6, L2 hit 2.7–2.9 →
// 1.3, batched miss 1.7–1.9 → 0.5.
//
// Why it is safe: a net.Conn's file descriptor is non-blocking (net
// creates every socket so, and waits for readiness in its poller), so
// RawSyscall never blocks: it returns the bytes the kernel has, or EAGAIN.
// The P is held only for the system call's duration, as for any short
// function. The call is made inside syscall.RawConn's Read or Write
// callback, which holds net's read or write lock on the descriptor (so it
// cannot be closed and reused under the call) and, on EAGAIN (the
// callback returns false), waits in the poller as net.Conn does, which is
// where the read and write deadlines apply: a deadline passed or a
// connection closed meanwhile fails the call as it fails net.Conn's.
// While in the call the goroutine cannot be preempted (a stop-the-world
// waits for it): a non-blocking read or write of at most the socket's
// buffer takes microseconds.
//
// What a Conn returns is what net.Conn returns: io.EOF at the peer's end
// of stream, *net.OpError (Op "read" or "write") around the poller's error
// (os.ErrDeadlineExceeded, net.ErrClosed) or the system call's
// (*os.SyscallError: ECONNRESET, EPIPE), the bytes written before a
// write's failure. A zero-length Read or Write is net.Conn's own. On
// another system than Linux, or a connection that is not a stream socket
// of net's, a Conn reads and writes through the net.Conn. Under the race
// detector the calls in the callbacks are syscall.Read and syscall.Write
// (sys_race.go), which tell it of the I/O's happens-before edges.
package rawio

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
)

// maxRW bounds one system call's bytes, as net's own (internal/poll).
const maxRW = 1 << 30

// Conn does the reads and writes of one net.Conn (New); everything else
// (Close, deadlines, addresses) is the net.Conn's. It is safe for
// concurrent use: one Read and one Write at a time, as net.Conn.
type Conn struct {
	c  net.Conn
	rc syscall.RawConn // nil: c's own Read and Write

	rmu   sync.Mutex // guards what follows, until wmu
	rp    []byte     // the read's buffer, for rfn
	rn    int        // bytes read
	rerr  error      // the system call's failure
	rfn   func(fd uintptr) bool
	pend  bool // Pending's answer
	pfn   func(fd uintptr) bool
	reads atomic.Int64 // read system calls made raw (Calls)

	asking bool // Ask's request not yet written (askFD), under both locks
	afn    func(fd uintptr) bool

	wmu    sync.Mutex // guards what follows
	wp     []byte     // the write's bytes, for wfn
	wn     int        // bytes written
	werr   error      // the system call's failure
	wwait  bool       // wait for the socket to take all of wp
	wlast  int        // wn when the write last waited (writeFD)
	wfn    func(fd uintptr) bool
	writes atomic.Int64 // write system calls made raw (Calls)
	taken  atomic.Int64 // Taken
}

// New returns c's reads and writes. Raw when the system supports it and c
// is one of net's stream sockets (TCP, or Unix "unix"); otherwise c's own.
func New(c net.Conn) *Conn {
	x := &Conn{c: c}
	if !supported || !stream(c) {
		return x
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return x
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return x
	}
	// The callbacks are made once, so a call allocates nothing.
	x.rc, x.rfn, x.wfn, x.pfn, x.afn = rc, x.readFD, x.writeFD, x.peekFD, x.askFD
	return x
}

// stream: a read of 0 bytes is the end of the stream only on a stream
// socket (on a datagram socket it is an empty datagram).
func stream(c net.Conn) bool {
	switch a := c.LocalAddr().(type) {
	case *net.TCPAddr:
		return true
	case *net.UnixAddr:
		return a.Net == "unix"
	}
	return false
}

// Raw reports whether c's reads and writes are made raw.
func (c *Conn) Raw() bool { return c.rc != nil }

// Calls returns how many read and write system calls c made raw: what
// shows that a connection's bytes go this way (an atomic add per call,
// against a system call's microsecond).
func (c *Conn) Calls() (reads, writes int64) {
	return c.reads.Load(), c.writes.Load()
}

// Read reads into p as net.Conn's Read: it waits for bytes (in the poller,
// under the read deadline) and returns those the socket has, io.EOF at the
// end of the stream.
func (c *Conn) Read(p []byte) (int, error) {
	if c.rc == nil || len(p) == 0 {
		return c.c.Read(p)
	}
	if len(p) > maxRW {
		p = p[:maxRW]
	}
	c.rmu.Lock()
	c.rp, c.rn, c.rerr = p, 0, nil
	err := c.rc.Read(c.rfn)
	n, serr := c.rn, c.rerr
	c.rp, c.rerr = nil, nil
	c.rmu.Unlock()
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case serr != nil:
		return 0, c.opError("read", serr)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Pending reports whether a read would not wait now: bytes are there to
// be read, the peer ended the stream, the socket failed, or the read
// deadline has passed or c is closed. It reads nothing and never waits
// (recvfrom(2) with MSG_PEEK|MSG_DONTWAIT). ok is false when c is not
// raw: then it did not look, and the caller peeks its own way.
func (c *Conn) Pending() (pending, ok bool) {
	if c.rc == nil {
		return false, false
	}
	c.rmu.Lock()
	c.pend = false
	err := c.rc.Read(c.pfn)
	pending = c.pend || err != nil
	c.rmu.Unlock()
	return pending, true
}

// Write writes all of p as net.Conn's Write: what the socket does not take
// at once waits in the poller, under the write deadline. It returns the
// bytes written before a failure.
func (c *Conn) Write(p []byte) (int, error) {
	if c.rc == nil || len(p) == 0 {
		return c.c.Write(p)
	}
	return c.write(p, true)
}

// WriteNow writes what of p the socket takes now, without waiting for
// room nor looking at the write deadline's clock beyond net's own check
// (a deadline already passed writes nothing), and returns how much, with
// the error that stopped it (none when the socket's buffer is full).
// Without raw calls it writes nothing: the caller's Write writes it all.
func (c *Conn) WriteNow(p []byte) (int, error) {
	if c.rc == nil || len(p) == 0 {
		return 0, nil
	}
	return c.write(p, false)
}

func (c *Conn) write(p []byte, wait bool) (int, error) {
	c.wmu.Lock()
	c.wp, c.wn, c.werr, c.wwait, c.wlast = p, 0, nil, wait, 0
	err := c.rc.Write(c.wfn)
	n, serr := c.wn, c.werr
	c.wp, c.werr = nil, nil
	c.wmu.Unlock()
	if err == nil {
		err = serr
	}
	if err != nil {
		return n, c.opError("write", err)
	}
	return n, nil
}

// Taken reports how many bytes the socket took of c's writes that had
// waited for room, counted each time one waits again: it does not change
// while the peer reads nothing, and grows while it reads. A write the
// socket takes whole at once, and the last part of one that waited, are
// not counted. Always 0 on a Conn that is not raw (Raw).
func (c *Conn) Taken() int64 { return c.taken.Load() }

// opError is err as net.Conn's Read or Write returns it: RawConn's own
// (Op "raw-read", "raw-write") renamed, a system call's wrapped.
//
// RawConn's *net.OpError is made for this call alone and carries what
// net.Conn's would (the descriptor's network, both addresses), so it is
// renamed in place rather than copied: net/http's background read ends in
// such an error on every request (abortPendingRead's deadline), and the
// copy, with errors.As's reflection and its escaping target, cost three
// allocations and ~200 ns of each (BenchmarkReadPastDeadline).
func (c *Conn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok && (oe.Op == "raw-read" || oe.Op == "raw-write") {
		oe.Op = op
		return oe
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: c.c.LocalAddr().Network(), Source: c.c.LocalAddr(), Addr: c.c.RemoteAddr(), Err: err}
}
