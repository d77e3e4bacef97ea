package redistest

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Gate is a TCP proxy in front of a Redis that, while held, holds back
// every reply to its clients; their commands still reach Redis at once.
// So a reply Redis made before some later event (a peer's write and its
// published invalidation, on another connection) reaches the client after
// that event, as one does on a loaded machine when the goroutine that
// reads it is not run for a while: an ordering a test sets, not a delay
// it hopes for. It reports when it holds a reply on a connection that
// sent a command naming the marker Hold was given.
type Gate struct {
	ln     net.Listener
	mu     sync.Mutex
	open   chan struct{} // closed while replies flow
	marker []byte
	gen    int64 // Holds so far: a connection's naming counts for the Hold it came in
	held   atomic.Bool
	named  bool // hold only the connections that named the marker (HoldNamed)
	wg     sync.WaitGroup
	cmu    sync.Mutex
	conns  []net.Conn
}

// StartGate proxies to target until the test ends; replies flow until
// Hold.
func StartGate(t testing.TB, target string) *Gate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &Gate{ln: ln, open: make(chan struct{})}
	close(g.open)
	g.wg.Add(1)
	go g.accept(target)
	t.Cleanup(g.close)
	return g
}

// Addr is the address clients dial instead of Redis's.
func (g *Gate) Addr() string { return g.ln.Addr().String() }

// Hold holds every reply from now on, until Release; Held reports once
// one is held on a connection that sent a command naming marker.
func (g *Gate) Hold(marker string) { g.hold(marker, false) }

// HoldNamed is Hold for the connections that send a command naming
// marker from now on only: the others' replies flow (a client's
// heartbeats, its other reads), so that one command's reply waits out
// the client's timeout while the client is otherwise well.
func (g *Gate) HoldNamed(marker string) { g.hold(marker, true) }

func (g *Gate) hold(marker string, named bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.named = named
	g.marker = []byte(marker)
	g.gen++
	g.held.Store(false)
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

// Release lets the held replies go, in order.
func (g *Gate) Release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// Held reports whether, since Hold, a reply is held on a connection that
// sent a command naming its marker.
func (g *Gate) Held() bool { return g.held.Load() }

func (g *Gate) accept(target string) {
	defer g.wg.Done()
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			continue
		}
		g.cmu.Lock()
		g.conns = append(g.conns, c, s)
		g.cmu.Unlock()
		var named atomic.Int64 // the Hold in which a command named the marker
		g.wg.Add(2)
		go func() { // commands: at once
			defer g.wg.Done()
			defer s.Close()
			g.pump(c, s, func(b []byte) {
				g.mu.Lock()
				m, gen := g.marker, g.gen
				g.mu.Unlock()
				if len(m) > 0 && bytes.Contains(b, m) {
					named.Store(gen)
				}
			})
		}()
		go func() { // replies: held while the gate is
			defer g.wg.Done()
			defer c.Close()
			g.pump(s, c, func([]byte) {
				g.mu.Lock()
				open, gen, only := g.open, g.gen, g.named
				g.mu.Unlock()
				select {
				case <-open:
				default:
					mine := named.Load() == gen
					if only && !mine {
						return
					}
					if mine {
						g.held.Store(true)
					}
					<-open
				}
			})
		}()
	}
}

// pump copies src to dst, calling before with each chunk before it is
// written.
func (g *Gate) pump(src, dst net.Conn, before func([]byte)) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			before(buf[:n])
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (g *Gate) close() {
	g.Release()
	g.ln.Close()
	g.cmu.Lock()
	for _, c := range g.conns {
		c.Close()
	}
	g.cmu.Unlock()
	g.wg.Wait()
}
