package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sidecache/sidecache/internal/config"
	"github.com/sidecache/sidecache/internal/server"
)

// TestTracingFromEnvFlushedInDrain: with OTEL_EXPORTER_OTLP_ENDPOINT set,
// the sidecar exports its spans over OTLP/HTTP, and the spans still queued
// when it stops are sent during the drain (the batch delay here is an
// hour, so only the shutdown flush can send them). The upstream's
// traceparent comes from the sidecar, not from the client.
func TestTracingFromEnvFlushedInDrain(t *testing.T) {
	var mu sync.Mutex
	var exported []string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/traces" {
			mu.Lock()
			exported = append(exported, string(b))
			mu.Unlock()
		}
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000")
	var traceparents []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		traceparents = append(traceparents, r.Header.Get("Traceparent"))
		mu.Unlock()
		fmt.Fprint(w, "v1")
	}))
	defer up.Close()

	cfg, err := config.Parse([]byte(fmt.Sprintf(baseConfig, up.URL, "")+"log:\n  access: true\n"), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var access syncBuffer
	srv, err := server.New(ctx, cfg, server.Options{Logger: slog.New(slog.DiscardHandler), WatchInterval: -1, Version: "v9.9.9",
		AccessLog: slog.New(slog.NewJSONHandler(&access, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	r := &replica{srv: srv, proxy: "http://" + srv.ProxyAddr()}
	const clientParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for range 2 {
		if code, _, _ := r.do(t, http.MethodGet, "/clients/1", "Traceparent", clientParent); code != 200 {
			t.Fatalf("GET: %d", code)
		}
	}
	mu.Lock()
	if len(exported) != 0 {
		t.Errorf("%d exports before the drain, want 0", len(exported))
	}
	mu.Unlock()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(exported, "")
	for _, want := range []string{"GET /clients/{id}", "cache.lookup", "cache.fill", "upstream.fetch", "v9.9.9", "sidecache"} {
		if !strings.Contains(all, want) {
			t.Errorf("exported spans lack %q", want)
		}
	}
	// One miss: the upstream saw one request, in the client's trace, whose
	// parent is the sidecar's fetch span rather than the client's span.
	if len(traceparents) != 1 || !strings.HasPrefix(traceparents[0], "00-0af7651916cd43dd8448eb211c80319c-") || traceparents[0] == clientParent {
		t.Errorf("upstream traceparents %q, want one in the client's trace with the sidecar's span as parent", traceparents)
	}
	// Each access line leads to its trace.
	n := 0
	for _, l := range access.lines() {
		if l["trace_id"] == "0af7651916cd43dd8448eb211c80319c" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d access lines carry the trace_id, want 2: %v", n, access.lines())
	}
}
