package tracing_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sidecache/sidecache/internal/tracing"
)

func TestEnabled(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		on      bool
		wantErr string
	}{
		{name: "nothing set: off", env: nil},
		{name: "endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, on: true},
		{name: "traces endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, on: true},
		{name: "exporter otlp, default endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true},
		{name: "exporter none wins over an endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{name: "sdk disabled wins", env: map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "sdk disabled false", env: map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"}, on: true},
		{name: "another exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: "only otlp and none"},
		{name: "grpc protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, wantErr: "only http/protobuf"},
		{name: "traces protocol overrides", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, on: true},
		{name: "protocol alone does not turn it on", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			on, err := tracing.Enabled(func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || on != tc.on {
				t.Fatalf("Enabled = %v, %v; want %v", on, err, tc.on)
			}
		})
	}
}

// collector is an OTLP/HTTP receiver that keeps the bodies posted to
// /v1/traces.
type collector struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/traces" && r.Header.Get("Content-Type") == "application/x-protobuf" {
			c.mu.Lock()
			c.bodies = append(c.bodies, string(b))
			c.mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *collector) received() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.bodies, "")
}

// TestNewExportsAtShutdown: with the endpoint set, a span ended just before
// shutdown reaches the collector (the batch processor is flushed), named
// with the service name from the environment; with nothing set, New gives
// no provider.
func TestNewExportsAtShutdown(t *testing.T) {
	c := newCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.URL)
	t.Setenv("OTEL_SERVICE_NAME", "sidecache-test")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000") // only the shutdown flush can send it
	tp, shutdown, err := tracing.New(context.Background(), tracing.Options{Version: "v1.2.3"})
	if err != nil || tp == nil {
		t.Fatalf("New = %v, %v; want a provider", tp, err)
	}
	_, sp := tp.Tracer("test").Start(context.Background(), "the-span")
	sp.End()
	if got := c.received(); got != "" {
		t.Fatalf("exported before shutdown: %q", got)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := c.received()
	for _, want := range []string{"the-span", "sidecache-test", "v1.2.3"} {
		if !strings.Contains(got, want) {
			t.Errorf("export lacks %q", want)
		}
	}

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	tp, shutdown, err = tracing.New(context.Background(), tracing.Options{})
	if tp != nil || err != nil || shutdown(context.Background()) != nil {
		t.Fatalf("off: New = %v, %v", tp, err)
	}
}

// TestHandlerOff: with no provider the handler is not wrapped at all.
func TestHandlerOff(t *testing.T) {
	h := http.NewServeMux()
	if got := tracing.Handler(h, nil); got == nil || got != h {
		t.Fatalf("Handler(h, nil) wrapped h")
	}
}
