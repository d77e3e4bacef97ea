package l2

import (
	"context"
	"errors"
	"net"
	"syscall"
)

// Lateness is not evidence against Redis.
//
// The breaker (store.go) opens after FailureThreshold consecutive failures
// and sends every request to L1 and the upstream. Under CPU starvation —
// a loaded node, or CFS throttling at the container's CPU limit — the
// sidecar itself misses the per-call deadline while Redis answers in
// microseconds: the deadline lapses before the command is written, or
// while its reply already sits in the socket's receive buffer, or while
// the call waits for a pooled connection whose holders are starved too,
// or while a dial's handshake has completed (a local Redis answers a SYN
// at once) but the dialing goroutine has not yet run to see it.
// Counting those would open the breaker because the sidecar is slow, and
// the upstream calls that follow make it slower still. So the lean client
// (lean.go) marks them lateError, and go-redis's connections goLate
// (lateconn.go, where its pool waits are covered too), and done does not
// count them, as neither a failure nor a success; the call still fails
// and its request degrades on its own. Counted as before: a refused or reset connection, a dial
// that timed out unanswered, a read that
// timed out with nothing received, a partial write, an error reply such
// as LOADING.

// lateError is a call that failed because the sidecar was late, not
// because Redis was: unavailable is false for it.
type lateError struct {
	err    error
	unsent bool // nothing of the command was written: the connection is clean
}

func (e *lateError) Error() string { return e.err.Error() }
func (e *lateError) Unwrap() error { return e.err }

// late marks err as the sidecar's lateness.
func late(err error) error { return &lateError{err: err} }

// isLate reports whether err is, or wraps, a lateError or a goLate
// (lateconn.go).
func isLate(err error) bool {
	var le *lateError
	var gl *goLate
	return errors.As(err, &le) || errors.As(err, &gl)
}

// timedOut reports whether err is a deadline's (net's i/o timeout).
func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// writeFailed classifies a failed write of a command: a deadline that
// lapsed with no byte written is lateness (the poller fails the write
// before any system call once the deadline has passed; a request-reply
// connection whose previous reply was read whole has nothing unsent that
// could fill the socket's buffer). A partial write counts: Redis, or the
// path to it, stopped taking bytes.
func writeFailed(n int, err error) error {
	if n == 0 && timedOut(err) {
		return &lateError{err: err, unsent: true}
	}
	return err
}

// readFailed classifies a failed read of a reply on nc: a timeout while
// the reply (or the rest of it) is already in the socket's receive buffer
// is lateness — Redis answered, the sidecar did not read in time.
func readFailed(nc net.Conn, err error) error {
	if timedOut(err) && !isLate(err) && pending(nc) {
		return late(err)
	}
	return err
}

// dialLate dials addr with d: a dial that timed out although the
// connection was established (dialWatch) is lateness, not Redis's failure.
func dialLate(ctx context.Context, d net.Dialer, addr string) (net.Conn, error) {
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
		return nil, late(err)
	}
	return nc, err
}
