// Package upfail is what a client is told when the upstream fails: the
// status the SPEC promises for the cause — 504 for a call that ran out of
// time (RFC 9110 §15.6.5), 502 for a refused or reset connection and
// everything else (§15.6.3), 503 with Retry-After for a call the sidecar
// refused to make (§15.6.4, §10.2.3) — and a fixed text, never the
// upstream's words.
//
// It exists apart from the proxy because every path (ReverseProxy's
// pass-through, the lean loop, the cached fill, the bulk call, a split
// list) answers the same cause with the same status, and that mapping
// reads and tests alone.
package upfail

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sidecache/sidecache/internal/cachestatus"
)

// Error is an upstream failure the client may be told about: only its
// status and a fixed text leave the sidecar, never Err's words.
type Error struct {
	Code int // the status the client gets: 502, 503 or 504
	Err  error
}

func (e *Error) Error() string { return "proxy: upstream: " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Classify maps a transport error to the status the spec promises: 504 for
// a timeout, 502 for a refused or reset connection and everything else. An
// Error already classified is returned as it is.
func Classify(err error) *Error {
	var ue *Error
	if errors.As(err, &ue) {
		return ue
	}
	if TimedOut(err) {
		return &Error{Code: http.StatusGatewayTimeout, Err: err}
	}
	return &Error{Code: http.StatusBadGateway, Err: err}
}

// TimedOut reports whether err is a call that ran out of time: its
// context's deadline (upstream.timeout) or a network timeout.
func TimedOut(err error) bool {
	var te interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &te) && te.Timeout()
}

// DeadlineFirst names ctx's end as the cause of err when ctx has ended: a
// call whose own context is cancelled from ctx must read as a timeout
// (504) when ctx's deadline ended it, not as a broken connection (502).
func DeadlineFirst(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	return err
}

// RetryAfter is a 503's Retry-After: upstream.timeout in whole seconds,
// rounded up, at least 1 (by then the calls in flight have ended).
func RetryAfter(timeout time.Duration) int {
	return max(1, int((timeout+time.Second-1)/time.Second))
}

// Write answers e with its status, st as the Cache-Status member (no
// fwd-status: no answer came; detail upstream-error unless st has one)
// and the fixed text of its status.
func Write(w http.ResponseWriter, e *Error, st cachestatus.Member) {
	st.FwdStatus = 0
	if st.Detail == "" {
		st.Detail = "upstream-error"
	}
	w.Header().Set("Cache-Status", st.String())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(e.Code)
	switch e.Code {
	case http.StatusGatewayTimeout:
		_, _ = w.Write([]byte("upstream timeout\n"))
	case http.StatusServiceUnavailable:
		_, _ = w.Write([]byte("upstream busy\n"))
	default:
		_, _ = w.Write([]byte("bad gateway\n"))
	}
}
