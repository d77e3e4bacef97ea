package proxy

import (
	"context"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/sidecache/sidecache/internal/tunnel"
)

// idleBodies returns rt with each answer's body cut once a read of it has
// waited d without a byte: NGINX's proxy_read_timeout (the time between
// two successive reads from the upstream) and Varnish's
// between_bytes_timeout, with upstream.timeout. A download that keeps
// coming is not cut (README: an answer over max_body_bytes streams
// through whole); one whose upstream stops sending is, so a hung upstream
// cannot hold the client's connection, the upstream's and the handler for
// as long as the client cares to wait (probe h3 #2). internal/lean bounds
// its own bodies the same way (lean.Conn.armBody); this is the Transport's
// side: ReverseProxy's pass-through and the cached path's calls on an
// https upstream or under tracing.
//
// The cut cancels the call's context, which makes http.Transport close the
// connection; the body's reader then fails with errBodyIdle, a timeout.
// ReverseProxy aborts the client's connection on it, as the large-body
// stream does (its answer has started: no status can say so), and the
// cached fill stores nothing of a body it could not read whole.
//
// A 101's body is the upgraded connection itself (ReverseProxy needs it
// writable): it is bounded instead by tunnelD without a byte either way
// (internal/tunnel, upstream.tunnel_idle_timeout), each cut told to count, and
// the tunnels open at once by slots: an upgrade request takes a slot
// before it is sent, or fails with tunnel.ErrLimit unsent, and gives it
// back when its answer is no 101 or its tunnel closes.
// CloseIdleConnections reaches rt's, if it has one.
func idleBodies(rt http.RoundTripper, d, tunnelD time.Duration, slots *tunnel.Slots, count func()) http.RoundTripper {
	return idleTransport{rt: rt, d: d, tunnelD: tunnelD, slots: slots, count: count}
}

type idleTransport struct {
	rt      http.RoundTripper
	d       time.Duration
	tunnelD time.Duration
	slots   *tunnel.Slots // nil: no bound
	count   func()        // told each tunnel cut
}

func (t idleTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	// Only a request that asks to upgrade is switched (RFC 9110 §7.8):
	// ReverseProxy keeps Upgrade on its way out for those alone.
	_, upgrade := r.Header["Upgrade"]
	slot := upgrade && t.slots != nil
	if slot && !t.slots.Take() {
		return nil, tunnel.ErrLimit
	}
	ctx, cancel := context.WithCancel(r.Context())
	resp, err := t.rt.RoundTrip(r.WithContext(ctx))
	if err != nil {
		cancel()
		if slot {
			t.slots.Give()
		}
		return nil, err
	}
	switched := resp.StatusCode == http.StatusSwitchingProtocols && resp.Body != nil
	if slot && !switched {
		t.slots.Give() // no tunnel came of it
	}
	if resp.StatusCode == http.StatusSwitchingProtocols || resp.Body == nil || resp.Body == http.NoBody {
		// Nothing to bound, or a tunnel (see idleBodies): the Transport
		// lets a switched connection go from the request's context.
		cancel()
		if switched {
			var give func()
			if slot {
				give = t.slots.Give
			}
			resp.Body = tunnel.Idle(r.Context(), resp.Body, t.tunnelD, t.count, give)
		}
		return resp, nil
	}
	resp.Body = newIdleBody(resp.Body, t.d, cancel)
	return resp, nil
}

// CloseIdleConnections closes rt's idle connections.
func (t idleTransport) CloseIdleConnections() {
	if c, ok := t.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// errBodyIdle is a body read cut by idleBodies: a timeout (classify: 504
// where an answer can still be chosen), as os.ErrDeadlineExceeded is.
var errBodyIdle error = &bodyIdleError{}

type bodyIdleError struct{}

func (*bodyIdleError) Error() string {
	return "proxy: upstream sent no byte of the body within upstream.timeout"
}
func (*bodyIdleError) Timeout() bool { return true }
func (*bodyIdleError) Unwrap() error { return os.ErrDeadlineExceeded }

// idleBody is a Transport answer's body under idleBodies' bound. One timer
// per body, reset only when it fires (at most once per d): a read costs a
// clock read and two atomic stores, not a timer's reset.
type idleBody struct {
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

func newIdleBody(rc io.ReadCloser, d time.Duration, cancel context.CancelFunc) *idleBody {
	b := &idleBody{rc: rc, d: d, cancel: cancel, base: time.Now()}
	b.t = time.AfterFunc(d, b.check)
	return b
}

func (b *idleBody) Read(p []byte) (int, error) {
	b.since.Store(int64(time.Since(b.base)) | 1)
	n, err := b.rc.Read(p)
	b.since.Store(0)
	if err != nil && b.cut.Load() {
		err = errBodyIdle
	}
	return n, err
}

// check runs when the timer fires: it cuts the body if the read in
// progress has waited d, and otherwise sets the timer for the moment it
// will have.
func (b *idleBody) check() {
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

func (b *idleBody) Close() error {
	b.closed.Store(true)
	b.t.Stop() // a check under way may set it once more: it then returns
	err := b.rc.Close()
	b.cancel()
	return err
}
