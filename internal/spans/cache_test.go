package spans_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/spans"
)

// Each cache call is one span naming what it asked and what it found: the
// tier asked, a hit or stale entry by its own TTL, a miss, the tier that
// answered; a bulk read counts its keys and hits.
func TestWrapCache(t *testing.T) {
	ctx := context.Background()
	now := time.Now() // l1 keeps entries by the real clock
	clock := func() time.Time { return now }
	store, err := l1.New(l1.Options{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(ctx) })
	c := spans.WrapCache(cache.NewTiered(store, nil, cache.TieredOptions{Now: clock}), tp.Tracer("test"), clock)
	e := &cache.Entry{Status: 200, Header: http.Header{}, Body: []byte("x"), StoredAt: now, TTL: time.Minute, Keep: time.Hour}

	for _, tc := range []struct {
		name  string
		call  func() error
		span  string
		attrs map[string]string
	}{
		{"local miss", func() error { _, _, err := c.LookupLocal(ctx, "k"); return err },
			"cache.lookup", map[string]string{"sidecache.cache.tier": "l1", "sidecache.cache.result": "miss", "sidecache.cache.found_in": ""}},
		{"store", func() error { err := c.Set(ctx, "k", e); store.Wait(); return err },
			"cache.store", map[string]string{}},
		{"hit", func() error { _, _, err := c.Lookup(ctx, "k"); return err },
			"cache.lookup", map[string]string{"sidecache.cache.tier": "l2", "sidecache.cache.result": "hit", "sidecache.cache.found_in": "l1"}},
		{"many", func() error { _, _, err := c.LookupMany(ctx, []string{"k", "other"}); return err },
			"cache.lookup_many", map[string]string{"sidecache.cache.keys": "2", "sidecache.cache.hits": "1"}},
		{"stale", func() error { now = now.Add(2 * time.Minute); _, _, err := c.LookupLocal(ctx, "k"); return err },
			"cache.lookup", map[string]string{"sidecache.cache.tier": "l1", "sidecache.cache.result": "stale", "sidecache.cache.found_in": "l1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp.Reset()
			if err := tc.call(); err != nil {
				t.Fatal(err)
			}
			ss := exp.GetSpans()
			if len(ss) != 1 || ss[0].Name != tc.span {
				t.Fatalf("spans %v, want one %s", ss, tc.span)
			}
			got := map[string]string{}
			for _, kv := range ss[0].Attributes {
				got[string(kv.Key)] = kv.Value.Emit()
			}
			for k, want := range tc.attrs {
				if got[k] != want {
					t.Errorf("%s = %q, want %q", k, got[k], want)
				}
			}
		})
	}
}

// An error marks the span failed; so does a 4xx or 5xx upstream status.
func TestErrorAndHTTPStatus(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	for _, tc := range []struct {
		name   string
		record func(trace.Span)
		failed bool
	}{
		{"error", func(sp trace.Span) { spans.Error(sp, errors.New("boom")) }, true},
		{"200", func(sp trace.Span) { spans.HTTPStatus(sp, 200) }, false},
		{"304", func(sp trace.Span) { spans.HTTPStatus(sp, 304) }, false},
		{"404", func(sp trace.Span) { spans.HTTPStatus(sp, 404) }, true},
		{"503", func(sp trace.Span) { spans.HTTPStatus(sp, 503) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp.Reset()
			_, sp := tp.Tracer("test").Start(context.Background(), spans.Fetch)
			tc.record(sp)
			sp.End()
			ss := exp.GetSpans()
			if len(ss) != 1 {
				t.Fatalf("%d spans, want 1", len(ss))
			}
			if failed := ss[0].Status.Code.String() == "Error"; failed != tc.failed {
				t.Fatalf("status %v, want failed=%v", ss[0].Status, tc.failed)
			}
		})
	}
}
