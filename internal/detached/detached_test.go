package detached_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/detached"
)

// blocking is an upstream that reads the whole body, says so on got, and
// answers 204 once release is closed (or gives up when its request ends).
func blocking(t *testing.T) (srv *httptest.Server, got chan struct{}, release chan struct{}) {
	t.Helper()
	got, release = make(chan struct{}, 1), make(chan struct{})
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- struct{}{}
		select {
		case <-release:
			w.WriteHeader(http.StatusNoContent)
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	return srv, got, release
}

func newWrite(t *testing.T, url string, client context.Context) *http.Request {
	t.Helper()
	out, err := http.NewRequestWithContext(client, http.MethodPost, url, strings.NewReader("payload"))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A client that hangs up after its write was sent whole does not cancel
// it: the upstream's answer still arrives, and the call knows it was sent.
func TestClientGoneAnswerStillArrives(t *testing.T) {
	srv, got, release := blocking(t)
	client, hangUp := context.WithCancel(context.Background())
	out, call := detached.Request(newWrite(t, srv.URL, client), client, time.Hour)
	defer call.Stop()
	done := send(srv, out)
	<-got
	hangUp()
	close(release)
	r := <-done
	if r.err != nil || r.code != http.StatusNoContent {
		t.Fatalf("got %d, %v; want the upstream's 204", r.code, r.err)
	}
	if !call.Sent() {
		t.Fatal("Sent() = false for a request written whole")
	}
}

// Once the client has gone, the request ends after the grace period: a
// hung upstream does not hold it for ever.
func TestGraceEndsRequestAfterClientLeft(t *testing.T) {
	srv, got, _ := blocking(t)
	client, hangUp := context.WithCancel(context.Background())
	out, call := detached.Request(newWrite(t, srv.URL, client), client, time.Millisecond)
	defer call.Stop()
	done := send(srv, out)
	<-got
	hangUp()
	if r := <-done; r.err == nil {
		t.Fatal("request outlived its grace period")
	}
	if !call.Sent() {
		t.Fatal("Sent() = false for a request written whole")
	}
}

// Stop ends the request while its client is still there.
func TestStopEndsRequest(t *testing.T) {
	srv, got, _ := blocking(t)
	out, call := detached.Request(newWrite(t, srv.URL, context.Background()), context.Background(), time.Hour)
	done := send(srv, out)
	<-got
	call.Stop()
	if r := <-done; r.err == nil {
		t.Fatal("request survived Stop")
	}
}

// A request that never reached the upstream was not sent: it cannot have
// been applied.
func TestNotSentWhenUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	out, call := detached.Request(newWrite(t, "http://"+addr+"/", context.Background()), context.Background(), time.Hour)
	defer call.Stop()
	resp, err := http.DefaultClient.Do(out)
	if err == nil {
		resp.Body.Close()
		t.Fatal("dial to a closed port succeeded")
	}
	if call.Sent() {
		t.Fatal("Sent() = true for a request that was never written")
	}
}

// result is what send's request got: the status, or the error.
type result struct {
	code int
	err  error
}

// send runs out on srv's client in the background.
func send(srv *httptest.Server, out *http.Request) <-chan result {
	done := make(chan result, 1)
	go func() {
		resp, err := srv.Client().Do(out)
		if err != nil {
			done <- result{err: err}
			return
		}
		resp.Body.Close()
		done <- result{code: resp.StatusCode}
	}()
	return done
}
