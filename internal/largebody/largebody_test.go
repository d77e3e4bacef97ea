package largebody

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sidecache/sidecache/internal/bufpool"
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

func upstream(t *testing.T, h http.HandlerFunc) *http.Response {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func streamOptions() *StreamOptions {
	return &StreamOptions{
		Strip:    func(h http.Header) { h.Del("Surrogate-Key") },
		Via:      []string{"1.1 sc"},
		Trailers: func(http.Header) {},
		Bufs:     bufpool.New(),
	}
}

// The client gets the part read, then the rest, under the upstream's
// header less hop-by-hop fields and tag headers, with the sidecar's member
// and Via; the upstream's body is closed after.
func TestStream(t *testing.T) {
	resp := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Surrogate-Key", "t1")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("Cache-Status", "origin; hit")
		w.Header().Set("Content-Length", "10")
		_, _ = io.WriteString(w, "0123456789")
	})
	prefix := make([]byte, 4)
	if _, err := io.ReadFull(resp.Body, prefix); err != nil {
		t.Fatal(err)
	}
	l := New(context.Background(), resp, prefix, func() {})
	if !l.Claim() {
		t.Fatal("claim failed")
	}
	w := httptest.NewRecorder()
	if err := l.Stream(w, httptest.NewRequest(http.MethodGet, "/big", nil), "sidecache; fwd=miss; detail=too-large", streamOptions()); err != nil {
		t.Fatal(err)
	}
	h := w.Result().Header
	if w.Body.String() != "0123456789" || h.Get("Content-Length") != "10" {
		t.Errorf("body %q, Content-Length %q; want the whole 10 bytes", w.Body, h.Get("Content-Length"))
	}
	if got, want := h.Get("Cache-Status"), "origin; hit, sidecache; fwd=miss; detail=too-large"; got != want {
		t.Errorf("Cache-Status %q, want %q", got, want)
	}
	if h.Get("Surrogate-Key") != "" || h.Get("Keep-Alive") != "" || h.Get("Via") != "1.1 sc" {
		t.Errorf("header %v: want no tag or hop-by-hop field, our Via", h)
	}
}

// A body the upstream broke off is an error: the caller aborts the
// client's connection rather than pass a short body off as whole.
func TestStreamBrokenOff(t *testing.T) {
	resp := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		_, _ = brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")
		_ = brw.Flush()
		c.Close()
	})
	l := New(context.Background(), resp, nil, func() {})
	l.Claim()
	if err := l.Stream(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/big", nil), "sidecache", streamOptions()); err == nil {
		t.Fatal("a body broken off streamed without an error")
	}
}
