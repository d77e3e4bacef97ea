package conformance

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/config"
	"github.com/sidecache/sidecache/internal/conformance/script"
	"github.com/sidecache/sidecache/internal/server"
)

// The table's vocabulary is script's (see there); the rows here play it
// against the server package's wiring in-process, on the test clock.
type (
	Case   = script.Case
	Resp   = script.Resp
	Step   = script.Step
	Result = script.Result
)

var (
	epoch  = script.Epoch()
	expand = script.Expand
)

// startInProcess runs the server package's wiring on real sockets, its
// clock the row's.
func startInProcess(t *testing.T, cfgYAML string, now func() time.Time) string {
	cfg, err := config.Parse([]byte(cfgYAML), "conformance.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg, server.Options{Logger: slog.New(slog.DiscardHandler), WatchInterval: -1, Now: now})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return "http://" + srv.ProxyAddr()
}

// runTable runs a section's rows as subtests.
func runTable(t *testing.T, cases []Case) {
	script.RunTable(t, cases, startInProcess, false)
}
