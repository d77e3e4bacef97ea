// Package late tells the sidecar's lateness apart from Redis's failure, so
// that the L2 store's breaker counts only evidence against Redis.
//
// The breaker (internal/cache/l2, store.go) opens after FailureThreshold
// consecutive failures and sends every request to L1 and the upstream.
// Under CPU starvation — a loaded node, or CFS throttling at the
// container's CPU limit — the sidecar itself misses the per-call deadline
// while Redis answers in microseconds: the deadline lapses before the
// command is written, or while its reply already sits in the socket's
// receive buffer, or while the call waits for a pooled connection whose
// holders are starved too, or while a dial's handshake has completed (a
// local Redis answers a SYN at once) but the dialing goroutine has not yet
// run to see it. Counting those would open the breaker because the sidecar
// is slow, and the upstream calls that follow make it slower still. So the
// lean MGET client (internal/cache/l2/mget) marks them Error, and go-redis's
// connections (goredis.go, where its pool waits are covered too) an
// opaque form of it, and the store's done does not count them (Is), as
// neither a failure nor a success; the call still fails and its request
// degrades on its own. Counted as before: a refused or reset connection, a
// dial that timed out unanswered, a read that timed out with nothing
// received, a partial write, an error reply such as LOADING.
//
// It imports nothing of the store: it classifies socket errors, and the
// store decides what to do with them.
package late

import (
	"context"
	"errors"
	"net"
	"syscall"
)

// Error is a call that failed because the sidecar was late, not because
// Redis was: the store's unavailable is false for it.
type Error struct {
	err    error
	unsent bool // nothing of the command was written: the connection is clean
}

func (e *Error) Error() string { return e.err.Error() }
func (e *Error) Unwrap() error { return e.err }

// Unsent reports whether nothing of the command was written, so the
// connection it failed on is clean and may be reused.
func (e *Error) Unsent() bool { return e.unsent }

// Mark marks err as the sidecar's lateness.
func Mark(err error) error { return &Error{err: err} }

// Is reports whether err is, or wraps, an Error or its go-redis form
// (Hide).
func Is(err error) bool {
	var le *Error
	var gl *goLate
	return errors.As(err, &le) || errors.As(err, &gl)
}

// Stage is where a Stall runs: before a command's write or before its
// reply's read.
type Stage uint8

const (
	BeforeWrite Stage = iota
	BeforeRead
)

// Stall, tests only, runs at a Stage with the connection: how a test makes
// the sidecar late on purpose. Nil in production.
type Stall func(at Stage, nc net.Conn)

// timedOut reports whether err is a deadline's (net's i/o timeout).
func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// WriteFailed classifies a failed write of a command, n bytes of it
// written: a deadline that lapsed with no byte written is lateness (the
// poller fails the write before any system call once the deadline has
// passed; a request-reply connection whose previous reply was read whole
// has nothing unsent that could fill the socket's buffer). A partial write
// counts: Redis, or the path to it, stopped taking bytes.
func WriteFailed(n int, err error) error {
	if n == 0 && timedOut(err) {
		return &Error{err: err, unsent: true}
	}
	return err
}

// ReadFailed classifies a failed read of a reply on nc: a timeout while
// the reply (or the rest of it) is already in the socket's receive buffer
// is lateness — Redis answered, the sidecar did not read in time.
func ReadFailed(nc net.Conn, err error) error {
	if timedOut(err) && !Is(err) && Pending(nc) {
		return Mark(err)
	}
	return err
}

// Dial dials addr over TCP with d: a dial that timed out although the
// connection was established (dialWatch) is lateness, not Redis's failure.
func Dial(ctx context.Context, d net.Dialer, addr string) (net.Conn, error) {
	var w dialWatch
	prev := d.Control
	d.Control = func(network, address string, rc syscall.RawConn) error {
		if prev != nil {
			if err := prev(network, address, rc); err != nil {
				return err
			}
		}
		return w.control(network, address, rc)
	}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if est := w.established(); err != nil && est && timedOut(err) {
		return nil, Mark(err)
	}
	return nc, err
}
