package server_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/config"
	"github.com/sidecache/sidecache/internal/server"
)

// lockedBuffer is a log sink many goroutines write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// A write whose invalidation cannot reach Redis logs a WARN; with Redis
// gone, every write does. Before, 60 writes logged 60 lines (a prober's
// 300 concurrent PATCHes logged 300 in 4 s): the process log is bounded
// per line kind now, and says how many lines it left out. The clock is
// frozen, so all the writes fall in one window whatever the machine's
// speed.
func TestWriteWarningsWhileRedisIsGoneAreBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close() // nothing listens there: Redis is unreachable from the start
	o := newOrigin(t)
	cfg, err := config.Parse([]byte(fmt.Sprintf(baseConfig, o.URL, l2Block(false, gone))), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	frozen := time.Now()
	r := runServer(t, cfg, server.Options{
		Logger:        slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		AccessLog:     slog.New(slog.DiscardHandler),
		WatchInterval: -1,
		Now:           func() time.Time { return frozen },
	})
	const writes = 60
	start := time.Now()
	var wg sync.WaitGroup
	codes := make(chan int, writes)
	for i := range writes {
		wg.Go(func() {
			code, _, _ := r.do(t, http.MethodPatch, fmt.Sprintf("/clients/%d", i))
			codes <- code
		})
	}
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Fatalf("PATCH with Redis gone: %d, want the upstream's 200", code)
		}
	}
	// The frozen clock keeps the writes in one window; a burst's last line
	// is written at its end (lograte.Handler), once per second of real time
	// at most: count those too.
	const line = `msg="invalidate after write"`
	tails := int(time.Since(start)/time.Second) + 1
	if n := logs.count(line); n == 0 || n > 10+tails {
		t.Fatalf("%d %s lines for %d writes in one window, want 1..%d", n, line, writes, 10+tails)
	}
}
