package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/config"
	"github.com/sidecache/sidecache/internal/redistest"
	"github.com/sidecache/sidecache/internal/server"
)

// TestPeerInvalidationDuringStartupIsNotARace: the L2 subscriber starts
// inside server.New, before the proxy exists, and applies peers'
// invalidations from its own goroutine. Peers publishing while a replica
// starts must not make it read the proxy unsynchronised. go test -race
// reports the race this test provokes on the code before the fix. The test
// does no socket I/O right after New on purpose: the race detector counts
// any socket write followed by a read as synchronisation, which would hide
// the race.
func TestPeerInvalidationDuringStartupIsNotARace(t *testing.T) {
	rs := redistest.Start(t)
	rc := rawClient(t, rs.Addr())
	o := newOrigin(t)
	cfg, err := config.Parse([]byte(fmt.Sprintf(baseConfig, o.URL, l2Block(false, rs.Addr()))), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a busy peer
		defer wg.Done()
		for ctx.Err() == nil {
			_ = rc.Publish(ctx, "sidecache:invalidate", `{"tags":["client:1"],"origin":"peer"}`).Err()
		}
	}()
	defer func() { cancel(); wg.Wait() }()
	for range 10 {
		srv, err := server.New(context.Background(), cfg, server.Options{Logger: slog.New(slog.DiscardHandler), WatchInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // the subscriber applies what the peer sends
		stopped, stop := context.WithCancel(context.Background())
		stop()
		if err := srv.Run(stopped); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNoL2UpSeriesWithoutL2: a replica configured without Redis exports no
// sidecache_l2_up at all; a 0 would fire SidecacheL2Down on every such pod.
func TestNoL2UpSeriesWithoutL2(t *testing.T) {
	o := newOrigin(t)
	r := startReplica(t, o.URL, "")
	code, _, m := r.do(t, http.MethodGet, "admin:/metrics")
	if code != 200 {
		t.Fatalf("metrics: %d", code)
	}
	if strings.Contains(m, "sidecache_l2_up") {
		t.Fatal("sidecache_l2_up exported by a replica without L2")
	}
}
