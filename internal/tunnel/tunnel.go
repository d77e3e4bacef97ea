// Package tunnel bounds the upgraded connections (a 101's tunnels, RFC 9110
// §7.8) the proxy relays: how many may be open at once (Slots,
// upstream.max_tunnels) and how long one may stay silent both ways (Idle,
// upstream.tunnel_idle_timeout).
//
// It exists apart from the proxy because a tunnel is no HTTP exchange: once
// switched, its bytes go both ways under httputil.ReverseProxy's copy, and
// the only rules are these two bounds, which read and test alone. The
// proxy's Transport wrapper (internal/idlebody) takes a slot for each
// upgrade request and wraps each 101's body with Idle.
package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sidecache/sidecache/internal/edge"
)

// DefaultIdleTimeout is upstream.tunnel_idle_timeout's default: Envoy's
// stream_idle_timeout, which bounds its upgraded streams too. It is long
// enough for a WebSocket that pings every minute, and it ends a tunnel
// whose two ends have both gone quiet within minutes, not never.
const DefaultIdleTimeout = 5 * time.Minute

// DefaultMax is upstream.max_tunnels' default: NGINX's worker_connections
// default, 512 tunnels' two connections each (or a thousand upgrade
// requests refused past it), far above what a pod's WebSocket app holds per
// replica and far below a file-descriptor limit.
const DefaultMax = 1024

// ErrLimit fails an upgrade request unsent: upstream.max_tunnels tunnels
// are open. The proxy answers it 503 with Retry-After and counts it as
// edge_refused{reason="tunnel-limit"}.
var ErrLimit = errors.New("proxy: upstream.max_tunnels upgraded connections open")

// Slots counts the upgraded connections open at once against
// upstream.max_tunnels. Each holds two connections and two goroutines for
// as long as its bytes move (the idle bound ends only the quiet ones), so a
// client opening busy tunnels could hold any number: past the bound an
// upgrade request is refused before it reaches the upstream, as HAProxy's
// maxconn or NGINX's worker_connections refuse connections past theirs.
// One per proxy, kept across reloads: a tunnel outlives the state it
// opened under.
type Slots struct {
	max int64
	n   atomic.Int64
}

// NewSlots returns max slots; max <= 0: DefaultMax.
func NewSlots(max int) *Slots {
	if max <= 0 {
		max = DefaultMax
	}
	return &Slots{max: int64(max)}
}

// Take takes a slot, reporting whether one was free.
func (s *Slots) Take() bool {
	if s.n.Add(1) > s.max {
		s.n.Add(-1)
		return false
	}
	return true
}

// Give gives a slot back.
func (s *Slots) Give() { s.n.Add(-1) }

// idle is a 101's body (the upgraded connection to the upstream, which
// ReverseProxy writes the client's bytes to and reads the upstream's from)
// cut once no byte has crossed it either way for d (HAProxy's timeout
// tunnel; NGINX's proxy_read_timeout on a WebSocket, with its own value:
// upstream.timeout is sized for an API call). Every byte of the tunnel
// passes through its Read or its Write, so these two see all its traffic.
//
// The cut closes the upstream connection, which ends ReverseProxy's copy
// from it, and the client's (client, when the request came through an
// edge.Listener): ReverseProxy's copy to the client may be blocked in a
// write to a client that does not read, and its copy from the client in a
// read, and neither would end with the upstream side alone. count is told
// each cut.
//
// A byte counts when the read or the write that moved it returns: a write
// blocked on an upstream that takes a 32 KiB chunk (io.Copy's) more slowly
// than d is cut as silence, a rate no live tunnel has.
//
// One timer per tunnel, reset only when it fires (at most once per d): a
// read or a write costs a clock read and an atomic store.
type idle struct {
	rwc    io.ReadWriteCloser
	d      time.Duration
	client *edge.Conn // nil: not reachable
	count  func()
	// give gives the tunnel's slot back (Slots), once, when it is closed
	// or its request ends; nil: it took none.
	give func()
	gave sync.Once
	stop func() bool // the request's AfterFunc
	base time.Time
	// last is when a byte last crossed, in nanoseconds after base.
	last   atomic.Int64
	t      *time.Timer
	closed atomic.Bool
}

// Idle returns body, a 101's upgraded connection, under the idle bound d,
// with ctx the request's (for its client connection); count, if set, is
// told each cut, and give, if set, is called once the tunnel is closed.
// ReverseProxy closes the body when the tunnel ends, but not on its way out
// for an answer it will not switch to (a protocol other than the one asked
// for): the request's end closes it then, so the upstream connection and
// the slot go with it. A body that is not writable, or d <= 0, is returned
// as it is, and give called at once.
func Idle(ctx context.Context, body io.ReadCloser, d time.Duration, count, give func()) io.ReadCloser {
	rwc, ok := body.(io.ReadWriteCloser)
	if !ok || d <= 0 {
		if give != nil {
			give() // ReverseProxy answers 502 for a body it cannot write
		}
		return body
	}
	b := &idle{rwc: rwc, d: d, client: edge.FromContext(ctx), count: count, give: give, base: time.Now()}
	b.t = time.AfterFunc(d, b.check)
	b.stop = context.AfterFunc(ctx, func() { _ = b.Close() })
	return b
}

func (b *idle) Read(p []byte) (int, error) {
	n, err := b.rwc.Read(p)
	if n > 0 {
		b.last.Store(int64(time.Since(b.base)))
	}
	return n, err
}

func (b *idle) Write(p []byte) (int, error) {
	n, err := b.rwc.Write(p)
	if n > 0 {
		b.last.Store(int64(time.Since(b.base)))
	}
	return n, err
}

// CloseWrite is the connection's: ReverseProxy half-closes the upstream
// side when the client half-closes its own.
func (b *idle) CloseWrite() error {
	if cw, ok := b.rwc.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return fmt.Errorf("tunnel: CloseWrite: %w", http.ErrNotSupported)
}

// check runs when the timer fires: it cuts the tunnel if no byte crossed
// for d, and otherwise sets the timer for the moment that will be so.
func (b *idle) check() {
	if b.closed.Load() {
		return
	}
	quiet := time.Since(b.base) - time.Duration(b.last.Load())
	if quiet < b.d {
		b.t.Reset(b.d - quiet)
		return
	}
	if b.closed.Swap(true) {
		return
	}
	if b.count != nil {
		b.count()
	}
	_ = b.rwc.Close()
	if b.client != nil {
		_ = b.client.Close()
	}
}

func (b *idle) Close() error {
	b.closed.Store(true)
	b.t.Stop() // a check under way returns at closed
	b.stop()
	err := b.rwc.Close()
	if b.give != nil {
		b.gave.Do(b.give)
	}
	return err
}
