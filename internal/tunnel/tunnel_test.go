package tunnel

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// guard is how long a test waits for a cut or a close before it calls the
// tunnel held: far longer than the idle bounds the tests set.
const guard = 10 * time.Second

// pair is a loopback TCP connection: near is what Idle wraps (the
// upstream side as ReverseProxy holds it), far is the upstream's end.
func pair(t *testing.T) (near, far net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	near, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	far = <-accepted
	if far == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { near.Close(); far.Close() })
	return near, far
}

// closedFromFar reports whether the far end reads EOF (or a reset) within
// guard: the near end was closed.
func closedFromFar(far net.Conn) bool {
	_ = far.SetReadDeadline(time.Now().Add(guard))
	_, err := io.Copy(io.Discard, far)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

func TestSlotsBound(t *testing.T) {
	s := NewSlots(2)
	if !s.Take() || !s.Take() {
		t.Fatal("two slots of two not taken")
	}
	if s.Take() {
		t.Fatal("a third slot of two taken")
	}
	s.Give()
	if !s.Take() {
		t.Fatal("a slot given back not taken again")
	}
	d := NewSlots(0)
	for i := range DefaultMax {
		if !d.Take() {
			t.Fatalf("slot %d of the default %d refused", i, DefaultMax)
		}
	}
	if d.Take() {
		t.Fatalf("slot %d of the default %d taken", DefaultMax+1, DefaultMax)
	}
}

// A tunnel silent both ways for d is cut: the upstream connection closed,
// the cut counted once, and the slot given back once it is closed.
func TestIdleCutsSilentTunnel(t *testing.T) {
	near, far := pair(t)
	var cuts, gives atomic.Int64
	b := Idle(context.Background(), near, 20*time.Millisecond, func() { cuts.Add(1) }, func() { gives.Add(1) })
	if _, err := b.(io.Writer).Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if !closedFromFar(far) {
		t.Fatal("a silent tunnel was not cut")
	}
	if got := cuts.Load(); got != 1 {
		t.Errorf("%d cuts counted, want 1", got)
	}
	_ = b.Close()
	_ = b.Close()
	if got := gives.Load(); got != 1 {
		t.Errorf("slot given back %d times, want 1", got)
	}
}

// The request's end closes a tunnel ReverseProxy never closed (an answer
// it would not switch to), and gives its slot back once; no cut is
// counted.
func TestRequestEndClosesTunnel(t *testing.T) {
	near, far := pair(t)
	var cuts, gives atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	b := Idle(ctx, near, guard, func() { cuts.Add(1) }, func() { gives.Add(1) })
	cancel()
	if !closedFromFar(far) {
		t.Fatal("the request's end did not close the tunnel")
	}
	_ = b.Close()
	if got := gives.Load(); got != 1 {
		t.Errorf("slot given back %d times, want 1", got)
	}
	if got := cuts.Load(); got != 0 {
		t.Errorf("%d cuts counted for a closed tunnel, want 0", got)
	}
}

// Bytes each way go through unchanged, and CloseWrite half-closes the
// upstream side.
func TestTunnelCarriesBytes(t *testing.T) {
	near, far := pair(t)
	b := Idle(context.Background(), near, guard, nil, nil).(io.ReadWriteCloser)
	defer b.Close()
	if _, err := b.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := b.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = far.SetDeadline(time.Now().Add(guard))
	got, err := io.ReadAll(far)
	if err != nil || string(got) != "hello" {
		t.Fatalf("upstream read %q, %v; want hello, EOF", got, err)
	}
	if _, err := far.Write([]byte("world")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(b, buf); err != nil || string(buf) != "world" {
		t.Fatalf("client side read %q, %v; want world", buf, err)
	}
}

// A body that cannot be written (no tunnel ReverseProxy can use), or no
// bound, is returned as it is and its slot given back at once.
func TestIdleLeavesOthers(t *testing.T) {
	var gives atomic.Int64
	give := func() { gives.Add(1) }
	body := io.NopCloser(strings.NewReader("x"))
	if got := Idle(context.Background(), body, time.Second, nil, give); got != body {
		t.Error("a read-only body was wrapped")
	}
	near, _ := pair(t)
	if got := Idle(context.Background(), near, 0, nil, give); got != io.ReadCloser(near) {
		t.Error("a tunnel with no bound was wrapped")
	}
	if got := gives.Load(); got != 2 {
		t.Errorf("slots given back %d times, want 2", got)
	}
}
