package proxy

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

// DefaultTunnelIdleTimeout is upstream.tunnel_idle_timeout's default:
// Envoy's stream_idle_timeout, which bounds its upgraded streams too. It
// is long enough for a WebSocket that pings every minute, and it ends a
// tunnel whose two ends have both gone quiet within minutes, not never.
const DefaultTunnelIdleTimeout = 5 * time.Minute

// DefaultMaxTunnels is upstream.max_tunnels' default: NGINX's
// worker_connections default, 512 tunnels' two connections each (or a
// thousand upgrade requests refused past it), far above what a pod's
// WebSocket app holds per replica and far below a file-descriptor limit.
const DefaultMaxTunnels = 1024

// errTunnelLimit fails an upgrade request unsent: upstream.max_tunnels
// tunnels are open. Answered 503 with Retry-After (passProxy's
// ErrorHandler) and counted as edge_refused{reason="tunnel-limit"}.
var errTunnelLimit = errors.New("proxy: upstream.max_tunnels upgraded connections open")

// tunnelSlots counts the upgraded connections open at once against
// upstream.max_tunnels. Each holds two connections and two goroutines
// for as long as its bytes move (tunnel_idle_timeout ends only the quiet
// ones), so a client opening busy tunnels could hold any number: past
// the bound an upgrade request is refused before it reaches the
// upstream, as HAProxy's maxconn or NGINX's worker_connections refuse
// connections past theirs. One per Handler, kept across reloads: a
// tunnel outlives the state it opened under.
type tunnelSlots struct {
	max int64
	n   atomic.Int64
}

func newTunnelSlots(max int) *tunnelSlots {
	if max <= 0 {
		max = DefaultMaxTunnels
	}
	return &tunnelSlots{max: int64(max)}
}

// take takes a slot, reporting whether one was free.
func (s *tunnelSlots) take() bool {
	if s.n.Add(1) > s.max {
		s.n.Add(-1)
		return false
	}
	return true
}

// give gives a slot back.
func (s *tunnelSlots) give() { s.n.Add(-1) }

// idleTunnel is a 101's body (the upgraded connection to the upstream,
// which ReverseProxy writes the client's bytes to and reads the
// upstream's from) cut once no byte has crossed it either way for d
// (HAProxy's timeout tunnel; NGINX's proxy_read_timeout on a WebSocket,
// with its own value: upstream.timeout is sized for an API call). Every
// byte of the tunnel passes through its Read or its Write, so these two
// see all its traffic.
//
// The cut closes the upstream connection, which ends ReverseProxy's copy
// from it, and the client's (client, when the request came through an
// edge.Listener): ReverseProxy's copy to the client may be blocked in a
// write to a client that does not read, and its copy from the client in
// a read, and neither would end with the upstream side alone. count is
// told each cut.
//
// A byte counts when the read or the write that moved it returns: a
// write blocked on an upstream that takes a 32 KiB chunk (io.Copy's) more
// slowly than d is cut as silence, a rate no live tunnel has.
//
// One timer per tunnel, reset only when it fires (at most once per d): a
// read or a write costs a clock read and an atomic store.
type idleTunnel struct {
	rwc    io.ReadWriteCloser
	d      time.Duration
	client *edge.Conn // nil: not reachable
	count  func()
	// give gives the tunnel's slot back (tunnelSlots), once, when it is
	// closed or its request ends; nil: it took none.
	give func()
	gave sync.Once
	stop func() bool // the request's AfterFunc
	base time.Time
	// last is when a byte last crossed, in nanoseconds after base.
	last   atomic.Int64
	t      *time.Timer
	closed atomic.Bool
}

// tunnel returns body, a 101's upgraded connection, under the idle bound
// d, with ctx the request's (for its client connection); give, if set,
// is called once the tunnel is closed. ReverseProxy closes the body
// when the tunnel ends, but not on its way out for an answer it will not
// switch to (a protocol other than the one asked for): the request's end
// closes it then, so the upstream connection and the slot go with it.
func tunnel(ctx context.Context, body io.ReadCloser, d time.Duration, count, give func()) io.ReadCloser {
	rwc, ok := body.(io.ReadWriteCloser)
	if !ok || d <= 0 {
		if give != nil {
			give() // ReverseProxy answers 502 for a body it cannot write
		}
		return body
	}
	b := &idleTunnel{rwc: rwc, d: d, client: edge.FromContext(ctx), count: count, give: give, base: time.Now()}
	b.t = time.AfterFunc(d, b.check)
	b.stop = context.AfterFunc(ctx, func() { _ = b.Close() })
	return b
}

// countTunnelCut counts a tunnel cut for its silence, with the edge's
// cuts: it is the client's connection that ends.
func (h *Handler) countTunnelCut() { h.m.EdgeRefused(edge.ReasonTunnelIdle) }

func (b *idleTunnel) Read(p []byte) (int, error) {
	n, err := b.rwc.Read(p)
	if n > 0 {
		b.last.Store(int64(time.Since(b.base)))
	}
	return n, err
}

func (b *idleTunnel) Write(p []byte) (int, error) {
	n, err := b.rwc.Write(p)
	if n > 0 {
		b.last.Store(int64(time.Since(b.base)))
	}
	return n, err
}

// CloseWrite is the connection's: ReverseProxy half-closes the upstream
// side when the client half-closes its own.
func (b *idleTunnel) CloseWrite() error {
	if cw, ok := b.rwc.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return fmt.Errorf("proxy: tunnel: CloseWrite: %w", http.ErrNotSupported)
}

// check runs when the timer fires: it cuts the tunnel if no byte crossed
// for d, and otherwise sets the timer for the moment that will be so.
func (b *idleTunnel) check() {
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

func (b *idleTunnel) Close() error {
	b.closed.Store(true)
	b.t.Stop() // a check under way returns at closed
	b.stop()
	err := b.rwc.Close()
	if b.give != nil {
		b.gave.Do(b.give)
	}
	return err
}
