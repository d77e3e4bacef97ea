package proxy_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/proxy"
	"github.com/sidecache/sidecache/internal/route"
	"github.com/sidecache/sidecache/internal/spans"
)

// panicTracer panics when a "cache.fill" span starts while on: a fault on
// a split id's own goroutine (fetchMissing runs each missing id's fill
// there, in that span), as a bug there would.
type panicTracer struct {
	trace.Tracer
	on *atomic.Bool
}

func (p panicTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if name == spans.Fill && p.on.Load() {
		panic("injected: split id fill")
	}
	return p.Tracer.Start(ctx, name, opts...)
}

type panicTracerProvider struct {
	trace.TracerProvider
	on *atomic.Bool
}

func (p panicTracerProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return panicTracer{Tracer: p.TracerProvider.Tracer(name, opts...), on: p.on}
}

// TestSplitPanicSettles: a panic in one id's fetch of a split list answers
// the list 502, as a panicked bulk fetch answers its waiters, logs it once
// per id with the route and its stack, and leaves the process serving (it
// killed the process: the per-id goroutines had no recover).
func TestSplitPanicSettles(t *testing.T) {
	o := newBulkOrigin(t, usersAnswer(func(string) bool { return true }))
	var on atomic.Bool
	on.Store(true)
	logs := &syncBuffer{}
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
	e := newEnv(t, o.upstream, []testRoute{userRoute(16, 20*time.Millisecond), list}, func(opt *proxy.Options, _ *l1.Store) {
		opt.TracerProvider = panicTracerProvider{TracerProvider: tp, on: &on}
		opt.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := fetch(ctx, e.front.URL+"/users?ids=1,2", nil)
	if a.err != nil || a.code != http.StatusBadGateway {
		t.Fatalf("list with a panicking id: %d %q %v, want 502", a.code, a.body, a.err)
	}
	if strings.Contains(a.body, "injected") {
		t.Errorf("502 body leaks %q", a.body)
	}
	if c := strings.Count(logs.String(), `msg="split fetch panicked" route=user panic="injected: split id fill"`); c != 2 {
		t.Errorf("panic logged %d times with its route, want once per id (2):\n%s", c, logs.String())
	}
	if c := strings.Count(logs.String(), "[running]"); c != 2 {
		t.Errorf("%d stacks logged, want one per id (2)", c)
	}
	// The fault off: the process still serves the list.
	on.Store(false)
	a = fetch(ctx, e.front.URL+"/users?ids=3,4", nil)
	if a.err != nil || a.code != http.StatusOK || a.body != "["+userJSON("3", nil)+","+userJSON("4", nil)+"]" {
		t.Fatalf("after the fault: %d %q %v, want the list", a.code, a.body, a.err)
	}
}
