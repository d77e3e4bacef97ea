package largebody

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

type body struct {
	io.Reader
	closes atomic.Int64
	closed chan struct{}
}

func (b *body) Close() error {
	if b.closes.Add(1) == 1 {
		close(b.closed)
	}
	return nil
}

func answer() (*http.Response, *body) {
	b := &body{Reader: strings.NewReader("rest"), closed: make(chan struct{})}
	return &http.Response{StatusCode: http.StatusOK, Body: b}, b
}

// The client whose request fetched the answer claims it once; nobody else
// can, and its request ending then closes nothing behind its back.
func TestClaimedOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	resp, b := answer()
	var ended atomic.Int64
	l := New(ctx, resp, []byte("prefix"), func() { ended.Add(1) })
	if !l.Claim() {
		t.Fatal("the first claim failed")
	}
	if l.Claim() {
		t.Fatal("a second claim succeeded")
	}
	cancel()
	l.Close()
	<-b.closed
	if n := b.closes.Load(); n != 1 {
		t.Errorf("body closed %d times, want 1", n)
	}
	if n := ended.Load(); n != 1 {
		t.Errorf("call ended %d times, want 1", n)
	}
}

// A client that leaves before claiming its answer lets the upstream go at
// once: the body is closed, the call ended, and no claim succeeds after.
func TestClientLeftCloses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	resp, b := answer()
	ended := make(chan struct{})
	l := New(ctx, resp, nil, func() { close(ended) })
	cancel()
	<-b.closed
	<-ended
	if l.Claim() {
		t.Error("an answer closed for a client that left was claimed")
	}
}
