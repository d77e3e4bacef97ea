package upfail

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cachestatus"
)

// Real failures, each from a real socket where it can be: the status a
// client is told for each cause.
func TestClassify(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, refused := net.Dial("tcp", addr)
	if refused == nil {
		t.Skip("a closed port accepted a connection")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	already := &Error{Code: http.StatusServiceUnavailable, Err: errors.New("queue full")}
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"refused", refused, http.StatusBadGateway},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), http.StatusBadGateway},
		{"deadline", ctx.Err(), http.StatusGatewayTimeout},
		{"network timeout", fmt.Errorf("read: %w", os.ErrDeadlineExceeded), http.StatusGatewayTimeout},
		{"cancelled by deadline", DeadlineFirst(ctx, context.Canceled), http.StatusGatewayTimeout},
		{"wrapped", fmt.Errorf("bulk: %w", already), http.StatusServiceUnavailable},
	} {
		if got := Classify(tc.err); got.Code != tc.want {
			t.Errorf("%s (%v): %d, want %d", tc.name, tc.err, got.Code, tc.want)
		}
	}
	if got := Classify(already); got != already {
		t.Error("an Error was classified anew")
	}
	if err := DeadlineFirst(context.Background(), refused); err != refused {
		t.Errorf("DeadlineFirst with a live context changed %v to %v", refused, err)
	}
}

func TestRetryAfter(t *testing.T) {
	for d, want := range map[time.Duration]int{0: 1, time.Millisecond: 1, time.Second: 1, 1500 * time.Millisecond: 2, 10 * time.Second: 10} {
		if got := RetryAfter(d); got != want {
			t.Errorf("RetryAfter(%v) = %d, want %d", d, got, want)
		}
	}
}

// The client gets the status, the sidecar's fixed text and a member with
// no fwd-status; never the upstream's words.
func TestWrite(t *testing.T) {
	for code, body := range map[int]string{502: "bad gateway\n", 503: "upstream busy\n", 504: "upstream timeout\n"} {
		w := httptest.NewRecorder()
		Write(w, &Error{Code: code, Err: errors.New("secret upstream words")}, cachestatus.Member{Fwd: "miss", FwdStatus: 200})
		if w.Code != code || w.Body.String() != body {
			t.Errorf("%d: wrote %d %q, want %q", code, w.Code, w.Body, body)
		}
		if got, want := w.Header().Get("Cache-Status"), "sidecache; fwd=miss; detail=upstream-error"; got != want {
			t.Errorf("%d: Cache-Status %q, want %q", code, got, want)
		}
		if w.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%d: no nosniff", code)
		}
	}
}
