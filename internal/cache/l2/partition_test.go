package l2

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// TestNetworkPartition puts a TCP relay between a replica and Redis and
// stops it forwarding: the sockets stay open but nothing comes back, as
// when a network path dies. Unlike a killed server this gives no error, only
// silence, which only timeouts and the subscriber's PINGs can detect.
func TestNetworkPartition(t *testing.T) {
	srv := redistest.Start(t)
	relay := startRelay(t, srv.Addr())
	a := newReplica(t, []string{srv.Addr()})
	b := newReplica(t, []string{relay.addr()}, func(o *Options) { o.Timeout = 200 * time.Millisecond })
	b.waitUp(t)
	ctx := context.Background()

	relay.hold()
	for i := 0; b.Up(); i++ {
		if i > 20 {
			t.Fatal("breaker still closed after 20 failed Gets")
		}
		start := time.Now()
		_, _, err := b.Get(ctx, "k")
		if took := time.Since(start); err == nil || took > time.Second {
			t.Fatalf("Get across a partition: err=%v after %s", err, took)
		}
	}
	if up := b.nextState(t, time.Second); up {
		t.Fatal("OnStateChange(true) during the partition")
	}
	deadline := time.Now().Add(4 * (maxUnanswered + 1) * idleCheck)
	for !strings.Contains(b.logs.String(), "unresponsive") {
		if time.Now().After(deadline) {
			t.Fatalf("dead subscription not noticed; log:\n%s", b.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}

	relay.release()
	if up := b.nextState(t, 10*time.Second); !up {
		t.Fatal("want OnStateChange(true) after the partition heals")
	}
	if inv := b.nextInvalidation(t, 10*time.Second); !inv.All {
		t.Fatalf("first message after the partition = %+v, want All", inv)
	}
	b.waitSubscribed(t)
	eventually(t, 10*time.Second, func() error { _, _, err := b.Get(ctx, "k"); return err })
	if err := a.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if inv := b.nextInvalidation(t, 2*time.Second); !slices.Equal(inv.Keys, []string{"k"}) {
		t.Fatalf("after the partition peer got %+v", inv)
	}
}

// relay forwards TCP connections to a target and can hold all traffic
// (hold), or only the client-to-server direction (holdUp), as a
// half-broken path does: the client still hears the server.
type relay struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cond   *sync.Cond
	held   bool
	upOnly bool // held applies to the client-to-server direction only
	conns  []net.Conn
}

func startRelay(t *testing.T, target string) *relay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, target: target}
	r.cond = sync.NewCond(&r.mu)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		r.release()
		r.mu.Lock()
		for _, c := range r.conns {
			_ = c.Close()
		}
		r.mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, c, u)
			r.mu.Unlock()
			wg.Go(func() { r.pipe(u, c, true) })
			wg.Go(func() { r.pipe(c, u, false) })
		}
	})
	return r
}

func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) hold() {
	r.mu.Lock()
	r.held, r.upOnly = true, false
	r.mu.Unlock()
}

func (r *relay) holdUp() {
	r.mu.Lock()
	r.held, r.upOnly = true, true
	r.mu.Unlock()
}

func (r *relay) release() {
	r.mu.Lock()
	r.held = false
	r.cond.Broadcast()
	r.mu.Unlock()
}

// pipe copies src to dst; upward is the client-to-server direction.
func (r *relay) pipe(dst, src net.Conn, upward bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		r.mu.Lock()
		for r.held && (upward || !r.upOnly) {
			r.cond.Wait()
		}
		r.mu.Unlock()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
