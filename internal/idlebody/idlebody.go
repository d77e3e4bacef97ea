// Package idlebody bounds the wait for an upstream answer's next byte:
// an http.RoundTripper whose answers' bodies are cut once a read of them
// has waited a given time without a byte (NGINX's proxy_read_timeout, the
// time between two successive reads from the upstream, and Varnish's
// between_bytes_timeout). A download that keeps coming is not cut (an
// answer over max_body_bytes streams through whole); one whose upstream
// stops sending is, so a hung upstream cannot hold the client's
// connection, the upstream's and the handler for as long as the client
// cares to wait. A 101's body, the upgraded connection itself, is
// bounded instead by internal/tunnel.
//
// It exists apart from the proxy because the bound is one wrapper around
// the Transport, outermost (a resent call's body is bounded too), that
// every path through it shares — ReverseProxy's pass-through and the
// cached path's calls on an https upstream or under tracing — and that
// reads and tests alone. internal/lean bounds its own bodies the same way
// (lean.Conn.armBody).
package idlebody

import (
	"context"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/sidecache/sidecache/internal/tunnel"
)

// Options are the bounds of Wrap's answers.
type Options struct {
	// Body is the longest a read of a body may wait for a byte
	// (upstream.timeout).
	Body time.Duration
	// Tunnel bounds a 101's tunnel: it is cut once no byte has crossed it
	// either way for this long (tunnel.Idle; <= 0: not bounded).
	Tunnel time.Duration
	// Slots bound the tunnels open at once: an upgrade request takes a
	// slot before it is sent, or fails with tunnel.ErrLimit unsent, and
	// gives it back when its answer is no 101 or its tunnel closes. nil:
	// no bound.
	Slots *tunnel.Slots
	// TunnelCut, if set, is told each tunnel cut for its silence.
	TunnelCut func()
}

// Wrap returns rt with each answer's body under o's bounds.
//
// The cut cancels the call's context, which makes http.Transport close the
// connection; the body's reader then fails with ErrIdle, a timeout.
// ReverseProxy aborts the client's connection on it (its answer has
// started: no status can say so), and a cached fill stores nothing of a
// body it could not read whole.
//
// A 101's body is the upgraded connection itself (ReverseProxy needs it
// writable): it is bounded by o.Tunnel and o.Slots instead
// (internal/tunnel). CloseIdleConnections reaches rt's, if it has one.
func Wrap(rt http.RoundTripper, o Options) http.RoundTripper {
	return transport{rt: rt, o: o}
}

type transport struct {
	rt http.RoundTripper
	o  Options
}

func (t transport) RoundTrip(r *http.Request) (*http.Response, error) {
	// Only a request that asks to upgrade is switched (RFC 9110 §7.8):
	// ReverseProxy keeps Upgrade on its way out for those alone.
	_, upgrade := r.Header["Upgrade"]
	slots := t.o.Slots
	slot := upgrade && slots != nil
	if slot && !slots.Take() {
		return nil, tunnel.ErrLimit
	}
	ctx, cancel := context.WithCancel(r.Context())
	resp, err := t.rt.RoundTrip(r.WithContext(ctx))
	if err != nil {
		cancel()
		if slot {
			slots.Give()
		}
		return nil, err
	}
	switched := resp.StatusCode == http.StatusSwitchingProtocols && resp.Body != nil
	if slot && !switched {
		slots.Give() // no tunnel came of it
	}
	if resp.StatusCode == http.StatusSwitchingProtocols || resp.Body == nil || resp.Body == http.NoBody {
		// Nothing to bound, or a tunnel (see Wrap): the Transport lets a
		// switched connection go from the request's context.
		cancel()
		if switched {
			var give func()
			if slot {
				give = slots.Give
			}
			resp.Body = tunnel.Idle(r.Context(), resp.Body, t.o.Tunnel, t.o.TunnelCut, give)
		}
		return resp, nil
	}
	resp.Body = newBody(resp.Body, t.o.Body, cancel)
	return resp, nil
}

// CloseIdleConnections closes rt's idle connections.
func (t transport) CloseIdleConnections() {
	if c, ok := t.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// ErrIdle is a body read cut by Wrap: a timeout (the proxy answers 504
// where an answer can still be chosen), as os.ErrDeadlineExceeded is.
var ErrIdle error = &idleError{}

type idleError struct{}

func (*idleError) Error() string {
	return "proxy: upstream sent no byte of the body within upstream.timeout"
}
func (*idleError) Timeout() bool { return true }
func (*idleError) Unwrap() error { return os.ErrDeadlineExceeded }

// body is an answer's body under Wrap's bound. One timer per body, reset
// only when it fires (at most once per d): a read costs a clock read and
// two atomic stores, not a timer's reset.
type body struct {
	rc     io.ReadCloser
	d      time.Duration
	cancel context.CancelFunc
	t      *time.Timer
	base   time.Time
	// since is when the read in progress began (nanoseconds after base,
	// never 0); 0: no read in progress. Only a read's wait counts: time
	// spent writing to a slow client is the client's (server.write_timeout).
	since  atomic.Int64
	cut    atomic.Bool
	closed atomic.Bool
}

func newBody(rc io.ReadCloser, d time.Duration, cancel context.CancelFunc) *body {
	b := &body{rc: rc, d: d, cancel: cancel, base: time.Now()}
	b.t = time.AfterFunc(d, b.check)
	return b
}

func (b *body) Read(p []byte) (int, error) {
	b.since.Store(int64(time.Since(b.base)) | 1)
	n, err := b.rc.Read(p)
	b.since.Store(0)
	if err != nil && b.cut.Load() {
		err = ErrIdle
	}
	return n, err
}

// check runs when the timer fires: it cuts the body if the read in
// progress has waited d, and otherwise sets the timer for the moment it
// will have.
func (b *body) check() {
	if b.closed.Load() {
		return
	}
	s := b.since.Load()
	now := int64(time.Since(b.base))
	if s != 0 && now-s >= int64(b.d) {
		b.cut.Store(true)
		b.cancel()
		return
	}
	next := b.d
	if s != 0 {
		next = time.Duration(s + int64(b.d) - now)
	}
	b.t.Reset(next)
}

func (b *body) Close() error {
	b.closed.Store(true)
	b.t.Stop() // a check under way may set it once more: it then returns
	err := b.rc.Close()
	b.cancel()
	return err
}
