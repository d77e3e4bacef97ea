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
// none may leave it open. That reads and tests alone.
package largebody

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"
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
